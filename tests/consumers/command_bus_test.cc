// KafkaCommandBus limits that need no broker: an oversized request is refused before producing.
#include "consumers/command_bus.h"

#include <gtest/gtest.h>

#include <future>

#include "events/event_limits.h"

namespace dcm {
namespace {

TEST(CommandBusTest, ARequestEventOverTheRequestLimitIs413AndNothingIsProduced) {
  OutcomeWaiters waiters;
  Metrics metrics;
  FakeClock clock;
  // No producer: producing would crash, so the test also proves nothing is produced.
  KafkaCommandBus bus(nullptr, &waiters, "dcm.provider-requests", "dcm.providers", WriteLimits{},
                      &clock, &metrics);
  CloudEvent request;
  request.id = "r-1";
  request.type = "dcm.provider.registration_requested";
  request.subject = "sp-1";
  request.data = "{\"endpoint\":\"http://x/" + std::string(kMaxRequestEventBytes, 'a') + "\"}";
  std::promise<Result<CloudEvent>> answered;
  bus.Submit(request, [&](Result<CloudEvent> r) { answered.set_value(std::move(r)); });
  auto result = answered.get_future().get();
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::kPayloadTooLarge);
  EXPECT_EQ(waiters.Pending(), 0u);
}

}  // namespace
}  // namespace dcm
