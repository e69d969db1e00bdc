#include "consumers/retention_gap.h"

#include <charconv>
#include <cstdio>

#include "src/common/log.h"

namespace dcm {

namespace {

std::string GapPrefix(const std::string& consumer) { return "gap/" + consumer + "/"; }

template <class T>
bool ParseNumber(std::string_view text, T& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

Status RetentionGaps::Load() {
  if (!store_) return OkStatus();
  std::vector<Gap> loaded;
  const std::string prefix = GapPrefix(consumer_);
  RETURN_IF_ERROR(store_->Scan(prefix, "", [&](std::string_view key, std::string_view value) {
    // key: <prefix><topic>/<partition>/<from>; value: <to>. Topic names have no '/'.
    const std::string_view rest = key.substr(prefix.size());
    const size_t slash = rest.find('/');
    const size_t last = rest.rfind('/');
    Gap gap{std::string(rest.substr(0, slash)), 0, 0, 0};
    if (slash == std::string_view::npos || last == slash ||
        !ParseNumber(rest.substr(slash + 1, last - slash - 1), gap.partition) ||
        !ParseNumber(rest.substr(last + 1), gap.from) || !ParseNumber(value, gap.to)) {
      return true;  // not a gap record: passed over
    }
    loaded.push_back(std::move(gap));
    return true;
  }));
  for (const Gap& g : loaded) {
    Logger("retention")
        ->warn(
            "msg=\"a retention gap found earlier\" consumer={} topic={} partition={} from={} "
            "to={} missing={}",
            consumer_, g.topic, g.partition, g.from, g.to, g.to - g.from);
  }
  std::lock_guard<std::mutex> lock(mu_);
  gaps_ = std::move(loaded);
  return OkStatus();
}

void RetentionGaps::Add(const std::string& topic, int32_t partition, int64_t from, int64_t to) {
  if (to <= from) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Gap& g : gaps_) {
      if (g.topic == topic && g.partition == partition && g.from == from) return;  // known
    }
  }
  if (store_) {
    StoreBatch batch;
    char from_key[24];
    snprintf(from_key, sizeof(from_key), "%020lld", static_cast<long long>(from));
    batch.Put(GapPrefix(consumer_) + topic + "/" + std::to_string(partition) + "/" + from_key,
              std::to_string(to));
    if (auto written = store_->Write(batch); !written) {
      Logger("retention")
          ->warn("msg=\"a retention gap could not be kept\" consumer={} error=\"{}\"", consumer_,
                 written.error().message);
    }
  }
  Logger("retention")
      ->error(
          "msg=\"records this consumer needs were dropped by the log's retention\" consumer={} "
          "topic={} partition={} from={} to={} missing={}",
          consumer_, topic, partition, from, to, to - from);
  if (metrics_) {
    metrics_
        ->GetCounter("dcm_retention_gap_records_total",
                     "Records a consumer needed that the log no longer held (retention gaps)",
                     "consumer=\"" + consumer_ + "\",topic=\"" + topic + "\"")
        .Inc(static_cast<uint64_t>(to - from));
  }
  std::lock_guard<std::mutex> lock(mu_);
  gaps_.push_back({topic, partition, from, to});
}

bool RetentionGaps::Empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gaps_.empty();
}

std::string RetentionGaps::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const Gap& g : gaps_) {
    if (!out.empty()) out += "; ";
    out += g.topic + "[" + std::to_string(g.partition) + "]: offsets " + std::to_string(g.from) +
           ".." + std::to_string(g.to - 1) + " (" + std::to_string(g.to - g.from) +
           " records) dropped by retention";
  }
  return out;
}

}  // namespace dcm
