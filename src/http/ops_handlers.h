// Operations endpoints (SPEC §3.5): /healthz, /readyz, /metrics, /admin/info.
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
  AdminInfo info;
  // Live facts for /admin/info (e.g. whether this instance owns the registrar partition).
  std::function<void(JsonWriter&)> live_info;
  // Renders the `projections` array of /admin/projections: name, digest, applied, lag, ready.
  std::function<void(JsonWriter&)> projections;
};

HttpResponse Healthz();
HttpResponse Readyz(const OpsContext& ctx);
HttpResponse MetricsText(const OpsContext& ctx);
HttpResponse Info(const OpsContext& ctx);
// Each projection's state digest (SPEC §5.4: a rebuild must be byte-identical) and progress.
HttpResponse Projections(const OpsContext& ctx);

}  // namespace dcm::http
