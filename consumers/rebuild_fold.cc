#include "consumers/rebuild_fold.h"

#include <fmt/format.h>

#include <algorithm>

namespace dcm::rebuild_detail {

RebuildProgress ProgressBoard::Snapshot() const {
  double fraction = 1.0;
  for (size_t g = 0; g < done.size(); ++g) {
    if (total[g] > 0) {
      fraction =
          std::min(fraction, static_cast<double>(done[g].load()) / static_cast<double>(total[g]));
    }
  }
  RebuildProgress progress;
  progress.total = messages;
  progress.done = static_cast<int64_t>(fraction * static_cast<double>(messages));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (seconds > 0) progress.events_per_s = static_cast<double>(progress.done) / seconds;
  if (progress.events_per_s > 0 && progress.done < messages) {
    progress.eta_s = static_cast<double>(messages - progress.done) / progress.events_per_s;
  }
  return progress;
}

FoldLoop::FoldLoop(const RebuildOptions& options, Store* store,
                   const std::vector<RebuildSource>& sources, Plan plan, ProgressBoard* board,
                   size_t group)
    : options_(options),
      store_(store),
      sources_(sources),
      plan_(std::move(plan)),
      board_(board),
      group_(group) {
  applied_.resize(sources.size());
  stats_.resize(sources.size());
  for (size_t j = 0; j < sources.size(); ++j) stats_[j].name = sources[j].projection->Name();
  for (const auto& reader : plan_.readers) {
    if (std::find(members_.begin(), members_.end(), reader.projection) == members_.end()) {
      members_.push_back(reader.projection);
    }
  }
  board_->total[group_] = plan_.total;
}

Status FoldLoop::Run(BatchQueue& queue) {
  auto status = Loop(queue);
  queue.Close(status ? std::nullopt : std::optional<Error>(status.error()));
  for (const auto& reader : plan_.readers) {
    auto& reached = stats_[reader.projection].reached[plan_.topics[reader.topic]];
    for (size_t p = 0; p < reader.next.size(); ++p) {
      reached[static_cast<int32_t>(p)] = reader.next[p];
    }
  }
  return status;
}

Status FoldLoop::Loop(BatchQueue& queue) {
  auto last_progress = Clock::now(), last_report = last_progress;
  const bool reporter = group_ == 0 && options_.on_progress;
  while (plan_.open_partitions > 0) {
    std::optional<Error> error;
    auto batch = queue.Pop(std::chrono::milliseconds(kPollMs), &error);
    const auto now = Clock::now();
    if (!batch) {
      if (error) return tl::unexpected(*error);
      if (queue.Closed()) return MakeError(ErrorCode::kInternal, "the rebuild was stopped");
      if (now - last_progress > std::chrono::milliseconds(options_.stall_timeout_ms)) {
        return MakeError(ErrorCode::kTimeout, StallMessage());
      }
      continue;
    }
    last_progress = now;
    RETURN_IF_ERROR(Fold(*batch));
    board_->done[group_].store(done_);
    if (reporter && now - last_report >= std::chrono::milliseconds(options_.progress_interval_ms)) {
      last_report = now;
      options_.on_progress(board_->Snapshot());
    }
  }
  return OkStatus();
}

std::string FoldLoop::StallMessage() const {
  for (size_t t = 0; t < plan_.topics.size(); ++t) {
    for (size_t p = 0; p < plan_.ranges[t].size(); ++p) {
      const auto& range = plan_.ranges[t][p];
      if (range.position < range.end) {
        return fmt::format(
            "no event for {} ms: {}/{} is at offset {} of target {} (Kafka unreachable?)",
            options_.stall_timeout_ms, plan_.topics[t], p, range.position, range.end);
      }
    }
  }
  return "no progress";
}

void FoldLoop::Advance(int t, int32_t p, int64_t next) {
  auto& range = plan_.ranges[t][p];
  const int64_t capped = std::min(next, range.end);
  if (capped <= range.position) return;
  done_ += capped - range.position;
  const bool was_open = range.position < range.end;
  range.position = capped;
  if (was_open && range.position >= range.end) --plan_.open_partitions;
}

Status FoldLoop::Fold(const DecodedBatch& decoded) {
  for (const auto& entry : decoded.entries) {
    const int32_t p = entry.raw->partition;
    if (entry.raw->offset >= plan_.ranges[entry.topic][p].end) continue;  // another group's
    RETURN_IF_ERROR(FoldOne(entry));
    Advance(entry.topic, p, entry.raw->offset + 1);
  }
  for (const auto& [t, p] : decoded.completed) Advance(t, p, plan_.ranges[t][p].end);
  for (auto& reader : plan_.readers) {
    for (size_t p = 0; p < reader.touched.size(); ++p) {
      if (!reader.touched[p]) continue;
      reader.touched[p] = 0;
      store_->PutOffset(batch_, stats_[reader.projection].name, plan_.topics[reader.topic],
                        static_cast<int32_t>(p), reader.next[p]);
    }
  }
  if (batch_.Count() > 0) RETURN_IF_ERROR(store_->Write(batch_));
  for (const size_t j : members_) {
    // A rebuild's projections have no waiters or listeners (projections_cmd.cc), so
    // AfterCommit only drops its per-batch state: it gets one empty placeholder per applied
    // event instead of a copy of each (a copy cost ~10% of the fold).
    placeholders_.resize(applied_[j]);
    sources_[j].projection->AfterCommit(placeholders_);
    applied_[j] = 0;
  }
  return OkStatus();
}

Status FoldLoop::FoldOne(const DecodedBatch::Entry& entry) {
  const rd_kafka_message_t* m = entry.raw;
  for (const size_t r : plan_.readers_of_topic[entry.topic]) {
    ReaderState& reader = plan_.readers[r];
    const int32_t p = m->partition;
    if (m->offset < reader.next[p] || m->offset >= reader.target[p]) continue;
    reader.next[p] = m->offset + 1;
    reader.touched[p] = 1;
    auto& stats = stats_[reader.projection];
    if (!entry.event) {
      ++stats.poison;
      continue;
    }
    rd_kafka_timestamp_type_t ts_type;
    const EventPosition position{
        plan_.topics[entry.topic],
        p,
        m->offset,
        rd_kafka_message_timestamp(m, &ts_type),
        std::string_view(static_cast<const char*>(m->key ? m->key : ""), m->key_len),
        std::string_view(static_cast<const char*>(m->payload ? m->payload : ""), m->len)};
    Projection* projection = sources_[reader.projection].projection;
    if (auto status = projection->Apply(*entry.event, position, batch_); !status) {
      if (status.error().code != ErrorCode::kCorruption) {
        return MakeError(status.error().code,
                         fmt::format("{} at {}/{}@{}: {}", stats.name, position.topic, p, m->offset,
                                     status.error().message));
      }
      ++stats.poison;
      continue;
    }
    ++stats.events;
    ++applied_[reader.projection];
  }
  return OkStatus();
}

}  // namespace dcm::rebuild_detail
