#include "src/common/config.h"

#include <algorithm>

#include "src/common/duration.h"
#include "src/common/url.h"

namespace dcm {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    if (first != std::string::npos) out.push_back(item.substr(first, last - first + 1));
    start = end + 1;
  }
  return out;
}

Result<std::chrono::milliseconds> ParseHealthEventsRetention(std::string_view text) {
  auto parsed = ParseGoDuration(text);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "HEALTH_EVENTS_RETENTION: " + parsed.error().message);
  }
  if (*parsed < std::chrono::seconds(1)) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "HEALTH_EVENTS_RETENTION must be at least 1s, got '" + std::string(text) + "'");
  }
  return *parsed;
}

namespace {

Status Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

Status ValidateTrustBoundary(const Config& c) {
  if (c.auth.disabled && c.AuthConfigured()) {
    return Invalid(
        "AUTH_DISABLED=true contradicts the auth settings given (AUTH_JWKS_FILE, AUTH_ISSUER_URL "
        "or --tls-client-ca-file): drop one");
  }
  if (!c.dev && !c.auth.disabled && !c.AuthConfigured()) {
    return Invalid(
        "no authentication configured: set AUTH_JWKS_FILE (a JWKS file) or AUTH_ISSUER_URL (an "
        "OIDC issuer) for bearer tokens, or --tls-client-ca-file with AUTH_CERT_ROLES for client "
        "certificates; or set AUTH_DISABLED=true to run without authentication (anyone who "
        "reaches --listen can then register, delete and rehydrate)");
  }
  if (!c.auth.issuer_url.empty()) {
    // The issuer's keys decide who is admin: fetched over plain HTTP, anyone on the path could
    // swap them. Plain HTTP only to a loopback issuer (a sidecar on this host).
    auto url = ParseHttpUrl(c.auth.issuer_url);
    if (!url) return Invalid("AUTH_ISSUER_URL '" + c.auth.issuer_url + "' " + url.error().message);
    const bool loopback =
        url->host == "localhost" || url->host == "::1" || url->host.starts_with("127.");
    if (url->scheme != "https" && !loopback) {
      return Invalid(
          "AUTH_ISSUER_URL must be https:// (plain http only for a loopback issuer), got '" +
          c.auth.issuer_url + "'");
    }
  }
  if (!c.auth.cert_roles.empty() && c.tls.client_ca_file.empty()) {
    return Invalid("AUTH_CERT_ROLES needs --tls-client-ca-file (client certificates)");
  }
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) {
    return Invalid("--tls-cert-file and --tls-key-file go together");
  }
  if (!c.tls.client_ca_file.empty() && !c.tls.enabled()) {
    return Invalid("--tls-client-ca-file needs --tls-cert-file and --tls-key-file");
  }
  if (c.outbound.sp_client_cert_file.empty() != c.outbound.sp_client_key_file.empty()) {
    return Invalid("SP_CLIENT_CERT_FILE and SP_CLIENT_KEY_FILE go together");
  }
  if (c.auth.refresh_interval < c.auth.min_refresh_interval ||
      c.auth.min_refresh_interval.count() < 100) {
    return Invalid("AUTH_JWKS_REFRESH_INTERVAL must be >= AUTH_JWKS_MIN_REFRESH_INTERVAL >= 100ms");
  }
  return OkStatus();
}

}  // namespace

DescriptorBudget SplitDescriptors(uint64_t nofile, bool probing, uint64_t probe_in_flight,
                                  uint64_t refusal_slots) {
  DescriptorBudget b;
  b.nofile = nofile;
  b.reserve = std::min<uint64_t>(1024, nofile / 4);
  if (probing) {
    b.probe_idle = (nofile - b.reserve) / 2;
    b.probe_in_flight = probe_in_flight;
  }
  const uint64_t taken = b.reserve + b.probe_idle + b.probe_in_flight + refusal_slots;
  b.api = std::max(kMinApiConnections, nofile > taken ? nofile - taken : 0);
  return b;
}

Status ValidateConfig(const Config& c) {
  if (c.listen.find(':') == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--listen must be HOST:PORT, got '" + c.listen + "'");
  }
  if (!c.dev && c.kafka_brokers.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "no Kafka: pass --kafka-brokers (or KAFKA_BROKERS), or --dev for the embedded "
                     "in-memory cluster");
  }
  if (c.service_types.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "SERVICE_TYPES must name at least one type");
  }
  if (c.read_wait.count() < 0 || c.read_wait > kMaxReadWait) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--read-wait must be 0..25s (the HTTP handler timeout is 30s)");
  }
  if (c.partitions < 1 || c.partitions > 1024) {
    return MakeError(ErrorCode::kInvalidArgument, "--partitions must be 1..1024");
  }
  if (c.write_timeout.count() < 100 || c.write_timeout.count() > 60000) {
    return MakeError(ErrorCode::kInvalidArgument, "--write-timeout must be 100ms..60s");
  }
  const auto& h = c.health;
  if (h.interval.count() < 100 || h.timeout.count() < 10 || h.base_backoff.count() < 100 ||
      h.max_backoff < h.base_backoff) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "health check durations: interval >= 100ms, timeout >= 10ms, base backoff >= "
                     "100ms, max backoff >= base backoff");
  }
  if (h.max_consecutive_failures < 1 || h.max_consecutive_failures > 1000 ||
      h.success_threshold < 1 || h.success_threshold > 1000) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "HEALTH_CHECK_MAX_CONSECUTIVE_FAILURES and HEALTH_CHECK_SUCCESS_THRESHOLD must "
        "be 1..1000");
  }
  const auto& l = c.limits;
  if (l.max_connections < 1 || l.heavy_read_threads < 0 || l.heavy_read_threads > 256 ||
      l.heavy_read_queue < 1 || l.heavy_read_timeout.count() < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--max-connections must be >= 1, --heavy-read-threads 0..256, "
                     "--heavy-read-queue >= 1 and --heavy-read-timeout positive");
  }
  if (l.watch_max_streams > 1000000 || l.watch_buffer_bytes < 4096 ||
      l.watch_buffer_bytes > (64u << 20) || l.watch_settle.count() < 0 ||
      l.watch_settle > std::chrono::seconds(10)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--watch-max-streams must be 0..1000000, --watch-buffer-bytes 4096..64MiB "
                     "and --watch-settle 0..10s");
  }
  if (c.health_events_retention < std::chrono::seconds(1)) {
    return MakeError(ErrorCode::kInvalidArgument, "HEALTH_EVENTS_RETENTION must be at least 1s");
  }
  if (h.heartbeat_timeout < std::chrono::seconds(1) ||
      h.heartbeat_record_every < std::chrono::seconds(1)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "HEARTBEAT_TIMEOUT and HEARTBEAT_RECORD_EVERY must be at least 1s");
  }
  if (h.provider_gc_after.count() != 0 && h.provider_gc_after < h.heartbeat_timeout) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "PROVIDER_GC_AFTER must be 0 (off) or at least HEARTBEAT_TIMEOUT");
  }
  if (h.max_in_flight < 1 || h.max_tls_handshakes < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "probe concurrency limits must be >= 1");
  }
  const auto& i = c.instances;
  if (i.cleanup_interval.count() < 10 || i.cleanup_max_retries < 1 ||
      i.cleanup_max_retries > 1000 || i.policy_timeout.count() < 10 || i.sp_timeout.count() < 10 ||
      i.worker_threads < 1 || i.worker_threads > 1024) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "instance settings: CLEANUP_INTERVAL >= 10ms, CLEANUP_MAX_RETRIES 1..1000, "
                     "policy and SP timeouts >= 10ms, worker threads 1..1024");
  }
  if (!i.policy_manager_url.empty() && !i.policy_manager_url.starts_with("http://") &&
      !i.policy_manager_url.starts_with("https://")) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "POLICY_MANAGER_EVALUATION_URL must be an http:// or https:// URL, got '" +
                         i.policy_manager_url + "'");
  }
  RETURN_IF_ERROR(ValidateTrustBoundary(c));
  RETURN_IF_ERROR(ValidateFederationConfig(c.federation, c.service_types));
  if (c.topics.prefix.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "--topic-prefix must not be empty");
  }
  return OkStatus();
}

}  // namespace dcm
