#include <signal.h>
#include <sys/resource.h>

#include "src/cli/commands.h"

namespace dcm::cli {

std::optional<std::string> AddKafkaProperties(const std::vector<std::string>& properties,
                                              std::map<std::string, std::string>& extra) {
  for (const auto& property : properties) {
    const auto eq = property.find('=');
    if (eq == std::string::npos || eq == 0) {
      return "--kafka-property must be key=value, got '" + property + "'";
    }
    extra[property.substr(0, eq)] = property.substr(eq + 1);
  }
  return std::nullopt;
}

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
