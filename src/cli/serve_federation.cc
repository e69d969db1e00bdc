// SPEC §10, provider side: the federation decider's wiring into `dcm serve` (serve_parts.h).
#include "src/cli/serve_parts.h"

namespace dcm::cli {

void AddFederationDecider(ServeParts& parts, FederationPolicy policy, FlavorCapacity capacity) {
  const Config& config = parts.config;
  FederationWorkerOptions options;
  options.requests_topic = config.topics.FederationRequests();
  options.outcomes_topic = config.topics.Federation();
  options.dead_letter_topic = config.topics.DeadLetter();
  options.group_id = config.topics.prefix + "federation";
  options.source = "dcm/federation/" + config.instance_id;
  options.kafka = parts.kafka;
  options.policy = std::move(policy);
  options.capacity = std::move(capacity);
  // One request in flight, like the registrar's outcomes: a reservation's outcomes stay in order.
  parts.federation_worker =
      std::make_unique<FederationWorker>(options, parts.store.get(), parts.command_producer.get(),
                                         &parts.metrics, &SystemClock::Instance());
  parts.components.Add({.name = "federation-decider",
                        .start = [w = parts.federation_worker.get()] { return w->Start(); },
                        .stop = [w = parts.federation_worker.get()] { w->Stop(); },
                        .ready = [w = parts.federation_worker.get()] { return w->Healthy(); }});
}

}  // namespace dcm::cli
