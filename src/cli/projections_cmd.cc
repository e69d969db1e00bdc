// `dcm projections`: placeholder until implemented.
#include "src/cli/commands.h"

namespace dcm::cli {

void RegisterProjectionsCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("projections", "Not implemented yet");
  cmd->callback([exit_code] { *exit_code = 2; });
}

}  // namespace dcm::cli
