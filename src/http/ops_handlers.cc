#include "src/http/ops_handlers.h"

#include "src/common/json_writer.h"
#include "src/http/problem.h"

namespace dcm::http {

HttpResponse Healthz() { return Json(200, R"({"status":"ok"})"); }

HttpResponse Readyz(const OpsContext& ctx) {
  JsonWriter w;
  bool all_ready = true;
  w.BeginObject();
  w.Key("checks");
  w.BeginObject();
  for (const auto& check : ctx.checks) {
    const bool ready = check.ready();
    all_ready &= ready;
    w.Field(check.name, ready ? "ready" : "not ready");
  }
  w.EndObject();
  bool any_detail = false;
  for (const auto& check : ctx.checks) {
    const std::string detail = check.detail ? check.detail() : std::string();
    if (detail.empty()) continue;
    if (!any_detail) {
      w.Key("details");
      w.BeginObject();
      any_detail = true;
    }
    w.Field(check.name, detail);
  }
  if (any_detail) w.EndObject();
  w.Field("status", all_ready ? "ready" : "not ready");
  w.EndObject();
  return Json(all_ready ? 200 : 503, w.Take());
}

HttpResponse ApiHealth(const OpsContext& ctx) {
  JsonWriter w;
  bool healthy = true;
  w.BeginObject();
  w.Key("checks");
  w.BeginObject();
  for (const auto* list : {&ctx.dependencies, &ctx.checks}) {
    for (const auto& check : *list) {
      const bool ok = check.ready();
      healthy &= ok;
      w.Field(check.name, ok ? "ok" : "unavailable");
    }
  }
  w.EndObject();
  w.Field("path", "/api/v1alpha1/health");
  w.Field("status", healthy ? "ok" : "unhealthy");
  w.EndObject();
  return Json(healthy ? 200 : 503, w.Take());
}

HttpResponse MetricsText(const OpsContext& ctx) {
  return HttpResponse{
      200, "text/plain; version=0.0.4; charset=utf-8", ctx.metrics->RenderPrometheus(), {}};
}

HttpResponse Info(const OpsContext& ctx) {
  const AdminInfo& info = ctx.info;
  JsonWriter w;
  w.BeginObject();
  w.Field("version", info.version);
  w.Field("instance_id", info.instance_id);
  w.Field("kafka_bootstrap_servers", info.kafka_bootstrap_servers);
  w.Field("dev_mode", info.dev_mode);
  if (info.dev_mode) {
    w.Field("events_storage",
            "in memory (embedded mock Kafka cluster): events are lost when this process exits");
  }
  w.Field("data_dir", info.data_dir);
  w.StringArray("topics", info.topics);
  w.StringArray("components", info.components);
  if (ctx.live_info) ctx.live_info(w);
  w.EndObject();
  return Json(200, w.Take());
}

HttpResponse Projections(const OpsContext& ctx) {
  JsonWriter w;
  w.BeginObject();
  w.Key("projections");
  w.BeginArray();
  if (ctx.projections) ctx.projections(w);
  w.EndArray();
  w.EndObject();
  return Json(200, w.Take());
}

HttpResponse HeartbeatProviders(const OpsContext& ctx) {
  const std::vector<std::string> ids =
      ctx.heartbeat_providers ? ctx.heartbeat_providers() : std::vector<std::string>();
  JsonWriter w;
  w.BeginObject();
  w.Field("instance_id", ctx.info.instance_id);
  w.Field("count", static_cast<int64_t>(ids.size()));
  w.StringArray("providers", ids);
  w.EndObject();
  return Json(200, w.Take());
}

}  // namespace dcm::http
