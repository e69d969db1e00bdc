// dcm: the composition root. It only parses the command line and hands over to a subcommand.
#include <CLI/CLI.hpp>

#include "src/cli/commands.h"
#include "src/cli/sp_sim_cmd.h"
#include "src/common/log.h"

int main(int argc, char** argv) {
  CLI::App app{"dcm: an event-sourced control plane for DCM Service Providers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", DCM_VERSION);
  dcm::InitLogging("info");  // logfmt for every subcommand; `serve --log-level` refines it
  int exit_code = 0;
  dcm::cli::RegisterServeCommand(app, &exit_code);
  dcm::cli::RegisterDevKafkaCommand(app, &exit_code);
  dcm::cli::RegisterEventsCommand(app, &exit_code);
  dcm::cli::RegisterProjectionsCommand(app, &exit_code);
  dcm::RegisterSpSimCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad command line exits 2, like a bad flag value.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
