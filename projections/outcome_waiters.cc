#include "projections/outcome_waiters.h"

#include <vector>

namespace dcm {

void OutcomeWaiters::Expect(const std::string& request_id, int64_t deadline_ms, Callback callback) {
  ExpectPositioned(request_id, deadline_ms,
                   [callback = std::move(callback)](Result<CloudEvent> outcome, OutcomePosition) {
                     callback(std::move(outcome));
                   });
}

void OutcomeWaiters::ExpectPositioned(const std::string& request_id, int64_t deadline_ms,
                                      PositionedCallback callback) {
  std::lock_guard lock(mu_);
  waiters_[request_id] = Waiter{deadline_ms, std::move(callback)};
}

OutcomeWaiters::PositionedCallback OutcomeWaiters::Take(const std::string& request_id) {
  std::lock_guard lock(mu_);
  auto it = waiters_.find(request_id);
  if (it == waiters_.end()) return nullptr;
  PositionedCallback callback = std::move(it->second.callback);
  waiters_.erase(it);
  return callback;
}

void OutcomeWaiters::Complete(const std::string& request_id, const CloudEvent& outcome,
                              OutcomePosition at) {
  if (auto callback = Take(request_id)) callback(outcome, at);
}

void OutcomeWaiters::Fail(const std::string& request_id, Error error) {
  if (auto callback = Take(request_id)) callback(tl::unexpected(std::move(error)), {});
}

void OutcomeWaiters::Expire(int64_t now_ms) {
  std::vector<PositionedCallback> expired;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline_ms <= now_ms) {
        expired.push_back(std::move(it->second.callback));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& callback : expired) {
    callback(MakeError(ErrorCode::kTimeout,
                       "the outcome was not applied in time; the request may still take effect"),
             {});
  }
}

size_t OutcomeWaiters::Pending() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

}  // namespace dcm
