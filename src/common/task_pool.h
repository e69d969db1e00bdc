// TaskPool: N threads running submitted tasks in order of submission (the instance worker's
// sagas and cleanup attempts; each blocks a thread on SP/policy calls). Stop drops the tasks
// not started yet and joins. Thread-safety: Submit from any thread; Start/Stop from one.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/common/thread_name.h"

namespace dcm {

class TaskPool {
 public:
  ~TaskPool() { Stop(); }

  // `name` names the threads ("name-0", ...) for top and perf.
  void Start(int threads, const std::string& name = "pool") {
    std::lock_guard lock(mu_);
    running_ = true;
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.push_back(NamedThread(name + "-" + std::to_string(i), [this] { Loop(); }));
    }
  }

  void Stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      running_ = false;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (auto& t : threads) t.join();
  }

  void Submit(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !running_ || !queue_.empty(); });
        if (!running_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  bool running_ = false;
};

}  // namespace dcm
