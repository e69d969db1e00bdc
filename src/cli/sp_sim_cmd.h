// `dcm sp-sim`: runs simulated Service Providers (src/sim/sp_sim.h) until SIGINT/SIGTERM.
#pragma once

namespace CLI {
class App;
}  // namespace CLI

namespace dcm {

// Adds the `sp-sim` subcommand to `app`. Its callback blocks until SIGINT or SIGTERM, then
// stops the simulation and returns. Fatal start-up errors are thrown as CLI::RuntimeError
// (CLI11's way to set the exit code; CLI11_PARSE/app.exit turn it into exit status 1).
void RegisterSpSimCommand(CLI::App& app);

}  // namespace dcm
