#include "consumers/local_deliveries.h"

#include <gtest/gtest.h>

#include <thread>

namespace dcm {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

KafkaMessage Record(const std::string& topic, int32_t partition, int64_t offset) {
  return KafkaMessage{.topic = topic,
                      .partition = partition,
                      .offset = offset,
                      .timestamp_ms = 1700000000000 + offset,
                      .key = "key",
                      .value = "value-" + std::to_string(offset),
                      .headers = {{"content-type", "application/cloudevents+json"}}};
}

// A delivery of `topic` [partition] at `offset`, reported as a producer's poll would.
void Deliver(LocalDeliveries& deliveries, const std::string& topic, int32_t partition,
             int64_t offset) {
  deliveries.Delivered(topic, [&] { return Record(topic, partition, offset); });
}

std::vector<int64_t> Offsets(const std::vector<KafkaMessage>& records) {
  std::vector<int64_t> out;
  for (const auto& r : records) out.push_back(r.offset);
  return out;
}

TEST(LocalDeliveriesTest, ADeliveryToOneOfItsTopicsWakesTheListenerAtTheNextNotify) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances", "dcm.status"}, false);
  Deliver(deliveries, "dcm.status", 0, 0);
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));  // not before the producer's poll is served
  deliveries.Notify();
  EXPECT_TRUE(deliveries.Wait(id, Clock::now()));
  // The wake is consumed: the next wait times out.
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));
  deliveries.Unregister(id);
}

// A listener that waits elsewhere (the registrar, in its group's poll) is woken by its callback,
// once per Notify that follows deliveries to its topics.
TEST(LocalDeliveriesTest, AListenersWakeCallbackRunsAtTheNotifyAfterADeliveryToItsTopics) {
  LocalDeliveries deliveries;
  int wakes = 0;
  const uint64_t id = deliveries.Register({"dcm.provider-requests"}, true, [&] { ++wakes; });
  Deliver(deliveries, "dcm.provider-requests", 0, 0);
  Deliver(deliveries, "dcm.provider-requests", 0, 1);
  EXPECT_EQ(wakes, 0);  // not before the producer's poll is served
  deliveries.Notify();
  EXPECT_EQ(wakes, 1);  // one wake for the poll's records
  deliveries.Notify();
  EXPECT_EQ(wakes, 1);  // nothing delivered since
  Deliver(deliveries, "dcm.providers", 0, 0);
  deliveries.Notify();
  EXPECT_EQ(wakes, 1);  // another topic
  LocalDeliveries::Positions positions{{"dcm.provider-requests", {{0, 0}}}};
  std::optional<LocalDeliveries::TimePoint> waiting;
  EXPECT_EQ(Offsets(deliveries.Take(id, positions, 10, &waiting)), (std::vector<int64_t>{0, 1}));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, ADeliveryToAnotherTopicDoesNotWake) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances"}, false);
  Deliver(deliveries, "dcm.providers", 0, 0);
  deliveries.Notify();
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, ADeliveryBeforeRegisteringIsNotAWake) {
  LocalDeliveries deliveries;
  Deliver(deliveries, "dcm.instances", 0, 0);
  deliveries.Notify();
  const uint64_t id = deliveries.Register({"dcm.instances"}, false);
  EXPECT_FALSE(deliveries.Wait(id, Clock::now()));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, OneDeliveryWakesEveryListenerOnItsTopic) {
  LocalDeliveries deliveries;
  const uint64_t a = deliveries.Register({"dcm.instances"}, false);
  const uint64_t b = deliveries.Register({"dcm.instances", "dcm.status"}, true);
  const uint64_t c = deliveries.Register({"dcm.status"}, false);
  Deliver(deliveries, "dcm.instances", 0, 0);
  deliveries.Notify();
  EXPECT_TRUE(deliveries.Wait(a, Clock::now()));
  EXPECT_TRUE(deliveries.Wait(b, Clock::now()));
  EXPECT_FALSE(deliveries.Wait(c, Clock::now()));
  for (uint64_t id : {a, b, c}) deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, AWaitingListenerIsWokenByADeliveryFromAnotherThread) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances"}, false);
  std::thread producer([&] {
    Deliver(deliveries, "dcm.instances", 0, 0);
    deliveries.Notify();
  });
  // Far deadline: only the delivery ends this wait.
  EXPECT_TRUE(deliveries.Wait(id, Clock::now() + 600s));
  producer.join();
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, AnUnregisteredListenerIsNeverWoken) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.instances"}, false);
  deliveries.Unregister(id);
  Deliver(deliveries, "dcm.instances", 0, 0);
  deliveries.Notify();
  EXPECT_FALSE(deliveries.Wait(id, Clock::now() + 600s));  // unknown id: returns at once
}

// Delivery reports of several producers come in any order; what a consumer takes is each
// partition's log in order from its position, as it would fetch it.
TEST(LocalDeliveriesTest, TakeGivesTheRecordsThatContinueEachPositionInOffsetOrder) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.providers"}, true);
  for (int64_t offset : {12, 10, 11}) Deliver(deliveries, "dcm.providers", 1, offset);
  Deliver(deliveries, "dcm.providers", 0, 4);
  LocalDeliveries::Positions positions = {{"dcm.providers", {{0, 4}, {1, 10}}}};
  std::optional<LocalDeliveries::TimePoint> kept;
  const auto taken = deliveries.Take(id, positions, 100, &kept);
  EXPECT_EQ(Offsets(taken), (std::vector<int64_t>{4, 10, 11, 12}));
  EXPECT_EQ(taken[1].value, "value-10");
  EXPECT_EQ(taken[1].timestamp_ms, 1700000000010);
  EXPECT_EQ(taken[1].headers, Record("dcm.providers", 1, 10).headers);
  EXPECT_EQ(positions["dcm.providers"][0], 5);
  EXPECT_EQ(positions["dcm.providers"][1], 13);
  EXPECT_FALSE(kept.has_value());
  EXPECT_TRUE(deliveries.Take(id, positions, 100, &kept).empty());  // each record once
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, ARecordAfterOneNotDeliveredHereIsKeptAndReportedAsWaiting) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.providers"}, true);
  const auto before = Clock::now();
  Deliver(deliveries, "dcm.providers", 0, 7);  // offset 6: another process's record
  LocalDeliveries::Positions positions = {{"dcm.providers", {{0, 6}}}};
  std::optional<LocalDeliveries::TimePoint> kept;
  EXPECT_TRUE(deliveries.Take(id, positions, 100, &kept).empty());
  ASSERT_TRUE(kept.has_value());
  EXPECT_GE(*kept, before);
  positions["dcm.providers"][0] = 7;  // the fetch brought offset 6
  EXPECT_EQ(Offsets(deliveries.Take(id, positions, 100, &kept)), (std::vector<int64_t>{7}));
  EXPECT_FALSE(kept.has_value());
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, RecordsBelowThePositionOrOfPartitionsNotAssignedAreDropped) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.providers"}, true);
  Deliver(deliveries, "dcm.providers", 0, 2);  // fetched already
  Deliver(deliveries, "dcm.providers", 3, 0);  // not assigned
  LocalDeliveries::Positions positions = {{"dcm.providers", {{0, 3}}}};
  std::optional<LocalDeliveries::TimePoint> kept;
  EXPECT_TRUE(deliveries.Take(id, positions, 100, &kept).empty());
  EXPECT_FALSE(kept.has_value());
  positions["dcm.providers"][0] = 2;  // sought back: the dropped record is fetched again
  EXPECT_TRUE(deliveries.Take(id, positions, 100, &kept).empty());
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, TakeStopsAtMaxAndTheRestComesNext) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.providers"}, true);
  for (int64_t offset = 0; offset < 5; ++offset) Deliver(deliveries, "dcm.providers", 0, offset);
  LocalDeliveries::Positions positions = {{"dcm.providers", {{0, 0}}}};
  std::optional<LocalDeliveries::TimePoint> kept;
  EXPECT_EQ(Offsets(deliveries.Take(id, positions, 3, &kept)), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(Offsets(deliveries.Take(id, positions, 3, &kept)), (std::vector<int64_t>{3, 4}));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, AListenerKeepsAtMostMaxOffersAndTheRestIsFetched) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.providers"}, true);
  const int64_t sent = LocalDeliveries::kMaxOffers + 10;
  for (int64_t offset = 0; offset < sent; ++offset) Deliver(deliveries, "dcm.providers", 0, offset);
  LocalDeliveries::Positions positions = {{"dcm.providers", {{0, 0}}}};
  std::optional<LocalDeliveries::TimePoint> kept;
  const auto taken = deliveries.Take(id, positions, sent, &kept);
  EXPECT_EQ(taken.size(), LocalDeliveries::kMaxOffers);
  EXPECT_EQ(positions["dcm.providers"][0], static_cast<int64_t>(LocalDeliveries::kMaxOffers));
  deliveries.Unregister(id);
}

TEST(LocalDeliveriesTest, AListenerWithoutOffersIsOnlyWoken) {
  LocalDeliveries deliveries;
  const uint64_t id = deliveries.Register({"dcm.providers"}, false);
  Deliver(deliveries, "dcm.providers", 0, 0);
  LocalDeliveries::Positions positions = {{"dcm.providers", {{0, 0}}}};
  std::optional<LocalDeliveries::TimePoint> kept;
  EXPECT_TRUE(deliveries.Take(id, positions, 100, &kept).empty());
  deliveries.Unregister(id);
}

}  // namespace
}  // namespace dcm
