// `dcm events`: placeholder until implemented.
#include "src/cli/commands.h"

namespace dcm::cli {

void RegisterEventsCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("events", "Not implemented yet");
  cmd->callback([exit_code] { *exit_code = 2; });
}

}  // namespace dcm::cli
