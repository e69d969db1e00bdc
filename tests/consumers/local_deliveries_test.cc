#include "consumers/local_deliveries.h"

#include <gtest/gtest.h>

#include <thread>

namespace dcm {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(LocalDeliveriesTest, ADeliveryToOneOfItsTopicsWakesTheSleeper) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances", "dcm.status"});
  deliveries.Delivered("dcm.status");
  EXPECT_TRUE(deliveries.Wait(id, Clock::now()));
  // The wake is consumed: the next wait times out.
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, ADeliveryToAnotherTopicDoesNotWake) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances"});
  deliveries.Delivered("dcm.providers");
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, ADeliveryBeforeRegisteringIsNotAWake) {
  LocalDeliveries deliveries;
  deliveries.Delivered("dcm.instances");
  const uint64_t id = deliveries.Register({"dcm.instances"});
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, OneDeliveryWakesEverySleeperOnItsTopic) {
  LocalDeliveries deliveries;
  const uint64_t a = deliveries.Register({"dcm.instances"});
  const uint64_t b = deliveries.Register({"dcm.instances", "dcm.status"});
  const uint64_t c = deliveries.Register({"dcm.status"});
  deliveries.Delivered("dcm.instances");
  EXPECT_TRUE(deliveries.Wait(a, Clock::now()));
  EXPECT_TRUE(deliveries.Wait(b, Clock::now()));
  EXPECT_FALSE(deliveries.Wait(c, Clock::now()));
  for (uint64_t id : {a, b, c}) deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, AWaitingSleeperIsWokenByADeliveryFromAnotherThread) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances"});
  std::thread producer([&] { deliveries.Delivered("dcm.instances"); });
  // Far deadline: only the delivery ends this wait.
  EXPECT_TRUE(deliveries.Wait(id, Clock::now() + 600s));
  producer.join();
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, AnUnregisteredSleeperIsNeverWoken) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances"});
  deliveries.Unregister(id);
  deliveries.Delivered("dcm.instances");
  EXPECT_FALSE(deliveries.Wait(id, Clock::now() + 600s));  // unknown id: returns at once
}

}  // namespace
}  // namespace dcm
