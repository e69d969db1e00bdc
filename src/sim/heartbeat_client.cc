// HeartbeatClient (heartbeat_client.h): registration, beats, failover across URLs and backoff.
#include "src/sim/heartbeat_client.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace dcm::sim {
namespace {

using std::chrono::milliseconds;

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

std::string Describe(const http::HttpResponse& res) {
  return "DCM answered " + std::to_string(res.status) + ": " + res.body.substr(0, 512);
}

// 5xx, a refused connection, a timeout, any transport error: this URL cannot answer now.
bool FailsOver(const Result<http::HttpResponse>& res) { return !res || res->status >= 500; }

}  // namespace

Backoff::Backoff(milliseconds base, milliseconds cap, double jitter)
    : base_(base), cap_(cap), jitter_(jitter) {}

milliseconds Backoff::Nominal() const {
  // base·2ⁿ in doubles (no overflow on long outages), capped.
  const double factor = std::pow(2.0, std::min(failures_, 30));
  return milliseconds(static_cast<int64_t>(std::min<double>(
      static_cast<double>(cap_.count()), static_cast<double>(base_.count()) * factor)));
}

milliseconds Backoff::Next(double uniform01) {
  const double nominal = static_cast<double>(Nominal().count());
  ++failures_;
  const double scaled = nominal * (1.0 + jitter_ * (2.0 * uniform01 - 1.0));
  return milliseconds(static_cast<int64_t>(std::min(scaled, static_cast<double>(cap_.count()))));
}

HeartbeatClient::HeartbeatClient(std::string registration_body, size_t url_count,
                                 HeartbeatOptions options, std::function<double()> uniform01,
                                 std::optional<std::string> id)
    : registration_body_(std::move(registration_body)),
      url_count_(std::max<size_t>(url_count, 1)),
      options_(std::move(options)),
      uniform01_(std::move(uniform01)),
      id_(std::move(id)),
      backoff_(options_.backoff_base, options_.backoff_cap, options_.jitter) {}

HeartbeatClient::StepResult HeartbeatClient::Failover(const std::string& error) {
  last_error_ = error;
  url_ = (url_ + 1) % url_count_;
  if (++failed_in_a_row_ < url_count_) return {milliseconds(0), false};  // the next URL, now
  failed_in_a_row_ = 0;  // every URL failed: a new round after the backoff
  return {backoff_.Next(uniform01_()), false};
}

HeartbeatClient::StepResult HeartbeatClient::BackOff(const std::string& error) {
  last_error_ = error;
  failed_in_a_row_ = 0;
  return {backoff_.Next(uniform01_()), false};
}

HeartbeatClient::StepResult HeartbeatClient::Step(const HeartbeatTransport& transport,
                                                  BeatHealth health) {
  if (!registered_) return Register(transport);
  if (health == BeatHealth::kSilent) return {options_.interval, false};
  return Beat(transport, health);
}

HeartbeatClient::StepResult HeartbeatClient::Register(const HeartbeatTransport& transport) {
  std::string target = options_.api_prefix + "/providers";
  if (id_) target += "?id=" + *id_;
  ++attempts_;
  const auto res = transport({url_, "POST", target, registration_body_});
  if (FailsOver(res)) return Failover(res ? Describe(*res) : res.error().message);
  failed_in_a_row_ = 0;  // the backoff is reset by the first beat that DCM accepts
  if (res->status != 200 && res->status != 201) {
    last_error_ = Describe(*res);
    return {std::nullopt, false};  // rejected: a 4xx will not change by itself
  }
  simdjson::dom::element doc;
  std::string_view id;
  if (Parser().parse(res->body).get(doc) != simdjson::SUCCESS ||
      doc["id"].get(id) != simdjson::SUCCESS || id.empty()) {
    last_error_ = "DCM answered " + std::to_string(res->status) + " without an id";
    return {std::nullopt, false};
  }
  id_ = std::string(id);
  registered_ = true;
  just_registered_ = true;
  last_error_.clear();
  return {milliseconds(0), true};  // beat there first
}

HeartbeatClient::StepResult HeartbeatClient::Beat(const HeartbeatTransport& transport,
                                                  BeatHealth health) {
  const char* body =
      health == BeatHealth::kUnhealthy ? R"({"status":"unhealthy"})" : R"({"status":"healthy"})";
  ++attempts_;
  const auto res =
      transport({url_, "PUT", options_.api_prefix + "/providers/" + *id_ + "/heartbeat", body});
  if (FailsOver(res)) return Failover(res ? Describe(*res) : res.error().message);
  if (res->status == 404 || res->status == 409) {
    // 404: DCM does not know the id (deleted, or lost): register again here, at once, then beat
    // here. 409: it holds the provider with liveness probe: register again (which updates it)
    // after a backoff, as after a 404 right after registering: no loop at full speed against
    // a DCM that keeps answering so.
    registered_ = false;
    const bool at_once = res->status == 404 && !just_registered_;
    just_registered_ = false;
    if (!at_once) return BackOff(Describe(*res));
    failed_in_a_row_ = 0;
    backoff_.Reset();
    last_error_ = Describe(*res);
    return {milliseconds(0), false};
  }
  if (res->status != 200) return BackOff(Describe(*res));
  failed_in_a_row_ = 0;
  just_registered_ = false;
  backoff_.Reset();
  ++beats_;
  last_error_.clear();
  return {options_.interval, false};
}

Status HeartbeatClient::Deregister(const HeartbeatTransport& transport) {
  if (!registered_ || !id_) return OkStatus();
  std::string error;
  for (size_t tried = 0; tried < url_count_; ++tried) {
    const auto res = transport({url_, "DELETE", options_.api_prefix + "/providers/" + *id_, ""});
    if (FailsOver(res)) {
      error = res ? Describe(*res) : res.error().message;
      url_ = (url_ + 1) % url_count_;
      continue;
    }
    if (res->status == 204 || res->status == 200 || res->status == 404) {
      registered_ = false;
      return OkStatus();
    }
    return MakeError(ErrorCode::kUnavailable, Describe(*res));
  }
  return MakeError(ErrorCode::kUnavailable, error);
}

}  // namespace dcm::sim
