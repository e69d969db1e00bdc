#include "src/http/heavy_reads.h"

#include <string>

#include "src/common/thread_name.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

constexpr int kPoolNice = 10;

HttpResponse Busy(const std::string& why) {
  return Problem(503, "the server is busy with heavy reads (" + why + "); retry later");
}

}  // namespace

Result<std::unique_ptr<HeavyReads>> HeavyReads::Start(HeavyReadOptions options) {
  if (options.threads < 1 || options.threads > 256 || options.queue < 1 ||
      options.timeout <= std::chrono::milliseconds::zero() || options.clock == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "heavy reads need 1..256 threads, a queue of at least 1, a positive timeout");
  }
  return std::unique_ptr<HeavyReads>(new HeavyReads(std::move(options)));
}

HeavyReads::HeavyReads(HeavyReadOptions options) : options_(std::move(options)) {
  if (Metrics* m = options_.metrics) {
    queued_gauge_ = &m->GetGauge("dcm_http_heavy_reads_queued",
                                 "Heavy reads (as_of, filtered scans) waiting for a pool thread");
    wait_ = &m->GetHistogram("dcm_http_heavy_read_wait_seconds",
                             "Time a heavy read waited for a pool thread, seconds");
    const char* help = "Heavy reads by what became of them: run, queue_full, expired";
    for (size_t i = 0; i < kResultNames.size(); ++i) {
      results_[i] = &m->GetCounter("dcm_http_heavy_reads_total", help,
                                   std::string("result=\"") + kResultNames[i] + "\"");
    }
  }
  for (int i = 0; i < options_.threads; ++i) {
    threads_.push_back(NamedThread("heavy-" + std::to_string(i), [this] {
      // Per thread on Linux: the I/O threads keep their priority. Best effort.
      if (options_.nice) (void)NiceThisThread(kPoolNice);
      Loop();
    }));
  }
}

HeavyReads::~HeavyReads() { Stop(); }

void HeavyReads::Count(Outcome outcome) {
  if (Counter* c = results_[static_cast<size_t>(outcome)]) c->Inc();
}

void HeavyReads::Submit(Task task, Respond respond) {
  {
    std::lock_guard lock(mu_);
    if (running_ && queue_.size() < options_.queue) {
      queue_.push_back({std::move(task), std::move(respond), options_.clock->Now()});
      if (queued_gauge_ != nullptr) queued_gauge_->Set(static_cast<int64_t>(queue_.size()));
      cv_.notify_one();
      return;
    }
  }
  Count(Outcome::kQueueFull);
  respond(Busy(std::to_string(options_.queue) + " waiting"));
}

void HeavyReads::Loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !running_ || !queue_.empty(); });
      if (!running_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      if (queued_gauge_ != nullptr) queued_gauge_->Set(static_cast<int64_t>(queue_.size()));
    }
    const TimePoint now = options_.clock->Now();
    const TimePoint deadline = item.enqueued + options_.timeout;
    if (wait_ != nullptr)
      wait_->Observe(std::chrono::duration<double>(now - item.enqueued).count());
    Count(now >= deadline ? Outcome::kExpired : Outcome::kRun);
    if (now >= deadline) {
      item.respond(Busy("waited " + std::to_string(options_.timeout.count()) + " ms for a thread"));
      continue;
    }
    item.task(Deadline{options_.clock, deadline});
  }
}

void HeavyReads::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    running_ = false;
    threads.swap(threads_);
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t HeavyReads::Queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace dcm::http
