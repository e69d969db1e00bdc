#include "consumers/fact_emitter.h"

#include <csignal>
#include <memory>

#include "src/common/log.h"

namespace dcm {

FactEmitter::FactEmitter(FactEmitterOptions options, Producer* producer, InstanceDecider* decider,
                         const Clock* clock)
    : options_(std::move(options)), producer_(producer), decider_(decider), clock_(clock) {}

void FactEmitter::Own(const std::vector<int32_t>& partitions) {
  std::unique_lock lock(own_mu_);
  owned_.insert(partitions.begin(), partitions.end());
}

void FactEmitter::DisownAll() {
  {
    std::unique_lock lock(own_mu_);
    owned_.clear();
  }
  // What this instance produced must be in Kafka before the next owner reads the high watermark
  // (emitters produce under own_mu_, so nothing is produced after the clear above).
  if (auto flushed = producer_->Flush(10000); !flushed) {
    Logger("instance-worker")
        ->warn("msg=\"flush on revoke incomplete\" error=\"{}\"", flushed.error().message);
  }
}

bool FactEmitter::Owns(const std::string& root) const { return OwnsPartition(PartitionOf(root)); }

bool FactEmitter::OwnsPartition(int32_t partition) const {
  std::shared_lock lock(own_mu_);
  return owned_.count(partition) > 0;
}

std::set<int32_t> FactEmitter::Owned() const {
  std::shared_lock lock(own_mu_);
  return owned_;
}

FactEmitter::Sent FactEmitter::Produce(const std::string& root, InstanceFact fact) {
  InstanceEnvelope& envelope = EnvelopeOf(fact);
  envelope.root = root;
  envelope.source = options_.source;
  envelope.time_ms = clock_->NowMillis();
  auto promise = std::make_shared<std::promise<Result<KafkaPosition>>>();
  Sent sent{promise->get_future(), std::move(fact)};
  producer_->Produce(
      options_.instances_topic, root, EncodeCloudEvent(EncodeInstanceFact(sent.fact)),
      {{"content-type", std::string(kCloudEventsContentType)}},
      [promise](Result<KafkaPosition> delivered) { promise->set_value(std::move(delivered)); },
      PartitionOf(root));
  return sent;
}

Status FactEmitter::Fold(Sent& sent) {
  auto delivered = sent.ack.get();
  if (!delivered) return tl::unexpected(delivered.error());
  if (auto folded = decider_->Apply(sent.fact, delivered->partition, delivered->offset); !folded) {
    Logger("instance-worker")
        ->error("msg=\"own fact not applied to the decision state\" type={} error=\"{}\"",
                TypeOf(sent.fact), folded.error().message);
    healthy_ = false;
  }
  return OkStatus();
}

std::optional<FactEmitter::Sent> FactEmitter::EmitAsync(const std::string& root,
                                                        InstanceFact fact) {
  std::shared_lock lock(own_mu_);
  if (!owned_.count(PartitionOf(root))) return std::nullopt;
  return Produce(root, std::move(fact));
}

bool FactEmitter::Acknowledged(Sent sent) {
  if (auto status = Fold(sent); !status) {
    Logger("instance-worker")
        ->warn("msg=\"fact not acknowledged\" type={} root={} error=\"{}\"", TypeOf(sent.fact),
               EnvelopeOf(sent.fact).root, status.error().message);
    return false;
  }
  if (!options_.crash_after_fact.empty()) {
    // "TYPE": SIGKILL after it; "SIGSTOP:TYPE": stop there (a stalled process) until SIGCONT.
    constexpr std::string_view kStop = "SIGSTOP:";
    const std::string_view hook = options_.crash_after_fact;
    const bool stop = hook.starts_with(kStop);
    if (TypeOf(sent.fact) == (stop ? hook.substr(kStop.size()) : hook)) {
      Logger("instance-worker")
          ->warn("msg=\"crash injection: {} after {}\"", stop ? "SIGSTOP" : "SIGKILL",
                 TypeOf(sent.fact));
      raise(stop ? SIGSTOP : SIGKILL);
    }
  }
  return true;
}

bool FactEmitter::Emit(const std::string& root, InstanceFact fact) {
  auto sent = EmitAsync(root, std::move(fact));
  return sent && Acknowledged(std::move(*sent));
}

}  // namespace dcm
