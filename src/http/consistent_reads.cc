#include "src/http/consistent_reads.h"

#include <memory>
#include <string>
#include <utility>

#include "projections/audit_projection.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

// `respond`, adding `token` as DCM-Position to whatever it answers.
Respond WithPosition(Respond respond, std::string token) {
  return [respond = std::move(respond), token = std::move(token)](HttpResponse r) {
    r.headers.emplace_back(kPositionHeader, token);
    respond(std::move(r));
  };
}

HttpResponse NotCaughtUp(std::chrono::milliseconds read_wait) {
  return Problem(503,
                 "this instance has not caught up with min_position and the writes it "
                 "acknowledged within " +
                     std::to_string(read_wait.count()) + " ms (--read-wait); retry");
}

}  // namespace

ReadServedBy ReadServedByRoute(std::string_view pattern, bool as_of) {
  if (as_of || pattern == "/events" || pattern.ends_with("/history")) return ReadServedBy::kAudit;
  // The peers' health is the prober's, never this caller's write: nothing to wait for.
  if (pattern == "/service-types" || pattern == "/peers") return ReadServedBy::kNothing;
  if (pattern.starts_with("/providers")) return ReadServedBy::kProviders;
  return ReadServedBy::kInstances;
}

ConsistentReads::ConsistentReads(ReadBarrier* barrier)
    : barrier_(barrier),
      providers_(barrier->Mask({RegistryProjection::kName, HealthProjection::kName})),
      instances_(barrier->Mask({InstanceProjection::kName, SpStatusProjection::kName})),
      audit_(barrier->Mask({AuditProjection::kName})) {}

uint32_t ConsistentReads::Mask(ReadServedBy served) const {
  switch (served) {
    case ReadServedBy::kNothing:
      return 0;
    case ReadServedBy::kProviders:
      return providers_;
    case ReadServedBy::kInstances:
      return instances_;
    case ReadServedBy::kAudit:
      return audit_;
  }
  return audit_;
}

void ConsistentReads::Read(ReadServedBy served, HttpRequest request, Respond respond,
                           Run run) const {
  ReadPosition min;
  if (const std::string* token = request.Query(kMinPositionParam)) {
    auto decoded = DecodePosition(*token, barrier_->topic_count());
    if (!decoded) return respond(ProblemFromError(decoded.error()));
    min = std::move(*decoded);
  }
  const uint32_t mask = Mask(served);
  ReadPosition acknowledged;
  const bool now = barrier_->CaughtUp(mask, min, &acknowledged);
  ReadPosition position = acknowledged;
  position.Merge(min);
  std::string token = EncodePosition(position);
  if (now) return run(request, WithPosition(std::move(respond), std::move(token)));
  barrier_->Keep(
      mask, std::move(acknowledged), std::move(min),
      [request = std::move(request), respond = std::move(respond), token = std::move(token),
       run = std::move(run), read_wait = barrier_->read_wait()](bool caught_up) mutable {
        if (!caught_up) return respond(NotCaughtUp(read_wait));
        run(request, WithPosition(std::move(respond), std::move(token)));
      });
}

Respond ConsistentReads::Write(Respond respond) const {
  return [respond = std::move(respond), barrier = barrier_](HttpResponse r) {
    if (r.status >= 200 && r.status < 300) {
      r.headers.emplace_back(kPositionHeader, EncodePosition(barrier->Acknowledged()));
    }
    respond(std::move(r));
  };
}

}  // namespace dcm::http
