// Names threads, so `top -H`, `perf report --sort comm` and gdb tell dcm's threads apart
// ("http-0", "registrar", "run-audit", ...). Linux keeps the first 15 bytes of a name.
#pragma once

#include <pthread.h>

#include <string>
#include <thread>
#include <utility>

namespace dcm {

inline void NameThisThread(std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
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
