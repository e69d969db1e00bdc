#include "src/cli/sp_sim_cmd.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "src/cli/commands.h"
#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/sim/sp_sim.h"

namespace dcm {
namespace {

struct SpSimFlags {
  sim::SpSimOptions options;
  bool no_register = false;
  std::vector<std::string> dcm_urls{"http://127.0.0.1:8080"};
  std::string heartbeat_interval = "5s";
};

void RunSpSim(SpSimFlags flags) {
  auto logger = Logger("sp-sim");
  // Block the stop signals before any thread starts, so every thread inherits the mask and
  // sigwait below is the only receiver.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // reloads the providers' TLS certificate
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);

  // Per-port mode holds a listening socket per provider, and DCM's probes add connections in
  // either mode; log the limit so a run that hits it is easy to explain.
  const auto [soft, hard] = cli::RaiseOpenFilesLimit();
  logger->info("msg=\"open files limit\" soft={} hard={}", soft, hard);
  flags.options.register_with_dcm = !flags.no_register;
  flags.options.dcm_url.clear();
  for (const auto& url : flags.dcm_urls) {
    flags.options.dcm_url += (flags.options.dcm_url.empty() ? "" : ",") + url;
  }
  auto interval = ParseGoDuration(flags.heartbeat_interval);
  if (!interval || interval->count() <= 0) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw CLI::ValidationError(
        "--heartbeat-interval",
        "a positive duration such as 5s or 500ms, not '" + flags.heartbeat_interval + "'");
  }
  flags.options.heartbeat_interval = *interval;
  auto sim = sim::SpSim::Start(std::move(flags.options));
  if (!sim) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    logger->error("msg=\"cannot start\" error=\"{}\"", sim.error().message);
    throw CLI::RuntimeError("sp-sim: " + sim.error().message, 1);
  }
  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (auto reloaded = (*sim)->ReloadTls(); !reloaded) {
      logger->error("msg=\"TLS reload failed\" error=\"{}\"", reloaded.error().message);
    } else {
      logger->info("msg=\"TLS certificate reloaded\"");
    }
  }
  logger->info("msg=\"stopping\" signal={}", signal_number);
  (*sim)->Stop();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace

void RegisterSpSimCommand(CLI::App& app) {
  auto flags = std::make_shared<SpSimFlags>();
  sim::SpSimOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand(
      "sp-sim", "Run simulated Service Providers that register with DCM (docs/http.md)");
  cmd->add_option("--dcm-url", flags->dcm_urls,
                  "DCM base URL to register with; repeat it or separate by commas for several "
                  "instances (heartbeats fail over between them)")
      ->envname("DCM_URL")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--liveness", o.liveness,
                  "probe: DCM probes the providers; heartbeat: they beat every "
                  "--heartbeat-interval (and delete their registration on exit); both: they "
                  "beat and DCM probes them too")
      ->check(CLI::IsMember({"probe", "heartbeat", "both"}))
      ->capture_default_str();
  cmd->add_option("--heartbeat-interval", flags->heartbeat_interval,
                  "Between two beats of one provider (--liveness heartbeat or both)")
      ->capture_default_str();
  cmd->add_option("--token", o.token,
                  "Bearer token for DCM (dcm-provider role); its subject owns the providers")
      ->envname("DCM_TOKEN");
  cmd->add_option("--dcm-ca-file", o.dcm_ca_file, "PEM CA bundle verifying an https --dcm-url")
      ->envname("DCM_CA_FILE");
  cmd->add_option("--tls-cert-file", o.tls_cert_file,
                  "Serve the providers over HTTPS with this certificate (endpoints are https://)");
  cmd->add_option("--tls-key-file", o.tls_key_file, "The providers' TLS private key");
  cmd->add_option("--count", o.count, "Number of simulated providers")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  cmd->add_option("--ports", o.ports,
                  "Shared listener ports (0: one port per provider); endpoints get /p/INDEX")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  cmd->add_option("--register-concurrency", o.register_concurrency,
                  "Registration requests in flight (workers, one connection each)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--service-types", o.service_types,
                  "Comma-separated service types, assigned round robin")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--name-prefix", o.name_prefix, "Provider names are PREFIX-TYPE-INDEX")
      ->capture_default_str();
  cmd->add_option("--host", o.host, "Address providers listen on and advertise")
      ->capture_default_str();
  cmd->add_option("--control-listen", o.control_listen, "HOST:PORT of the fault control API")
      ->capture_default_str();
  cmd->add_option("--region-codes", o.region_codes,
                  "Comma-separated metadata.region_code values, assigned round robin")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--max-instances", o.max_instances,
                  "metadata.resources.max_instances of every provider (0: not declared)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--no-register", flags->no_register, "Serve only; do not register with DCM");
  cmd->add_option("--api-prefix", o.api_prefix, "DCM API base path")->capture_default_str();
  o.version = DCM_VERSION;
  cmd->callback([flags] { RunSpSim(*flags); });
}

}  // namespace dcm
