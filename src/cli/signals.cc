#include <signal.h>
#include <sys/resource.h>

#include "src/cli/commands.h"

namespace dcm::cli {

std::function<int()> BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return [set] {
    int sig = 0;
    sigwait(&set, &sig);
    return sig;
  };
}

std::pair<uint64_t, uint64_t> RaiseOpenFilesLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return {0, 0};
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return {limit.rlim_cur, limit.rlim_max};
}

}  // namespace dcm::cli
