// Names threads, so `top -H`, `perf report --sort comm` and gdb tell dcm's threads apart
// ("http-0", "registrar", "run-audit", ...). Linux keeps the first 15 bytes of a name. Also lowers
// one thread's CPU priority (background folds).
#pragma once

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>
#include <utility>

namespace dcm {

inline void NameThisThread(std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
}

// Adds `by` to the calling thread's niceness (Linux: one thread, not the process), so the
// scheduler favours the process's other threads when the cores are busy. False (errno set) when
// the kernel refused.
inline bool NiceThisThread(int by) {
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (now == -1 && errno != 0) return false;
  return setpriority(PRIO_PROCESS, tid, now + by) == 0;
}

// A thread that names itself `name`, then runs `body`.
template <typename Body>
std::thread NamedThread(std::string name, Body body) {
  return std::thread([name = std::move(name), body = std::move(body)]() mutable {
    NameThisThread(name);
    body();
  });
}

}  // namespace dcm
