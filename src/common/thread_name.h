// Names the calling thread, so `top -H`, `perf report --sort comm` and gdb tell dcm's threads
// apart ("http-0", "registrar", "run-audit", ...). Linux keeps the first 15 bytes.
#pragma once

#include <pthread.h>

#include <string>

namespace dcm {

inline void NameThisThread(std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
}

}  // namespace dcm
