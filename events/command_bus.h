// CommandBus: how the HTTP layer turns a write into an event and learns its outcome, without
// knowing Kafka. The Kafka implementation is consumers/command_bus.h; tests use fakes.
#pragma once

#include <functional>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

class CommandBus {
 public:
  using Done = std::function<void(Result<CloudEvent>)>;
  virtual ~CommandBus() = default;

  // Appends `request` to the command topic and calls `done` once, from any thread: with the
  // outcome event after this instance's projection applied it (read-your-writes), or with
  // kUnavailable (Kafka did not acknowledge) or kTimeout (no outcome in time; it may still land).
  virtual void Submit(const CloudEvent& request, Done done) = 0;

  // Appends an outcome decided at the edge (an HTTP request rejected by validation) to the
  // outcome topic, for auditors. Fire and forget: failures are logged and counted.
  virtual void Record(const CloudEvent& outcome) = 0;
};

}  // namespace dcm
