#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <utility>

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
  // SPEC §6: the Kafka security settings by their environment names; --kafka-property wins.
  static constexpr std::pair<const char*, const char*> kSecurityEnv[] = {
      {"KAFKA_SECURITY_PROTOCOL", "security.protocol"}, {"KAFKA_SASL_MECHANISM", "sasl.mechanism"},
      {"KAFKA_SASL_USERNAME", "sasl.username"},         {"KAFKA_SASL_PASSWORD", "sasl.password"},
      {"KAFKA_SSL_CA_LOCATION", "ssl.ca.location"},
  };
  for (const auto& [env, property] : kSecurityEnv) {
    const char* value = std::getenv(env);
    if (value != nullptr && *value != '\0') extra.emplace(property, value);
  }
  return std::nullopt;
}

std::function<int()> BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
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
