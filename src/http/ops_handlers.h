// Operations endpoints (SPEC §3.5): /healthz, /readyz, /metrics, /admin/info, and DCM's
// GET /api/v1alpha1/health (SPEC §7).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/common/json_writer.h"
#include "src/common/metrics.h"
#include "src/http/http_types.h"

namespace dcm::http {

struct ReadinessCheck {
  std::string name;             // e.g. "projection:registry"
  std::function<bool()> ready;  // caught up and healthy
  // What an operator should know about it, shown under /readyz "details" (null or "": nothing),
  // e.g. the records a retention gap cost it.
  std::function<std::string()> detail = {};
};

struct AdminInfo {
  std::string version;
  std::string instance_id;
  std::string kafka_bootstrap_servers;
  bool dev_mode = false;
  std::vector<std::string> topics;
  std::vector<std::string> components;  // what this instance runs
  std::string data_dir;
};

struct OpsContext {
  Metrics* metrics = nullptr;
  std::vector<ReadinessCheck> checks;
  // Checks only GET /api/v1alpha1/health asks, before `checks` (e.g. "store": a read succeeds).
  std::vector<ReadinessCheck> dependencies;
  AdminInfo info;
  // Live facts for /admin/info (e.g. whether this instance owns the registrar partition).
  std::function<void(JsonWriter&)> live_info;
  // Renders the `projections` array of /admin/projections: name, digest, applied, lag, ready.
  std::function<void(JsonWriter&)> projections;
  // The heartbeat providers whose expiry this instance decides, sorted (null: it runs no prober).
  std::function<std::vector<std::string>()> heartbeat_providers;
};

HttpResponse Healthz();
HttpResponse Readyz(const OpsContext& ctx);
// GET /api/v1alpha1/health, shaped as DCM's control plane answers it: 200
// {"status":"ok","path":"/api/v1alpha1/health","checks":{"store":"ok","projection:registry":"ok",
// ...}}, or 503 with "status":"unhealthy" and the failing checks "unavailable". The checks are
// `dependencies` then `checks` (every component's readiness).
HttpResponse ApiHealth(const OpsContext& ctx);
HttpResponse MetricsText(const OpsContext& ctx);
HttpResponse Info(const OpsContext& ctx);
// Each projection's state digest (SPEC §5.4: a rebuild must be byte-identical) and progress.
HttpResponse Projections(const OpsContext& ctx);
// GET /admin/heartbeat-providers (SPEC §8): {"instance_id", "count", "providers": [ids]}, the
// heartbeat providers this instance decides expiry for. Over the live instances of a cluster each
// heartbeat provider is listed once (none twice) once the prober group has settled.
HttpResponse HeartbeatProviders(const OpsContext& ctx);

}  // namespace dcm::http
