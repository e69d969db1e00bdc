#include <signal.h>

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

}  // namespace dcm::cli
