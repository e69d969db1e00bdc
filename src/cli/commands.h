// Subcommands of the `dcm` binary. Each Register* adds its subcommand to `app`; the callback
// stores the process exit code in *exit_code.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dcm::cli {

void RegisterServeCommand(CLI::App& app, int* exit_code);
void RegisterDevKafkaCommand(CLI::App& app, int* exit_code);
// `dcm events`: read the event topics directly (src/cli/events_cmd.cc).
void RegisterEventsCommand(CLI::App& app, int* exit_code);
// `dcm projections rebuild|verify` (src/cli/projections_cmd.cc).
void RegisterProjectionsCommand(CLI::App& app, int* exit_code);

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call before starting threads, so they
// inherit the mask) and returns a function that waits for one of them and returns it (`dcm serve`
// reloads on SIGHUP and waits again; the other commands stop on any of them).
std::function<int()> BlockTerminationSignals();

// Adds each `--kafka-property` (librdkafka key=value) to `extra`, then the security settings of
// the environment (KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME,
// KAFKA_SASL_PASSWORD, KAFKA_SSL_CA_LOCATION) that no --kafka-property set; on a malformed one
// returns the error to print ("--kafka-property must be key=value, got '…'").
std::optional<std::string> AddKafkaProperties(const std::vector<std::string>& properties,
                                              std::map<std::string, std::string>& extra);

// Lifts the soft open-files limit (often 1024) to the hard one and returns {soft, hard}: the
// prober keeps a connection per provider and sp-sim a socket per provider or connection.
std::pair<uint64_t, uint64_t> RaiseOpenFilesLimit();

}  // namespace dcm::cli
