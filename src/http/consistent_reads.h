// ConsistentReads: the HTTP edge of SPEC §7 "Consistent reads" (the logic is
// projections/read_barrier.h). The router sends every API call through it:
//
//   GET  ── min_position malformed? 400 ── ReadBarrier::Wait ─ caught up now ─▶ handler, inline
//                                                            └ not yet ─▶ handler on the barrier's
//                                                              thread once caught up, or 503 +
//                                                              Retry-After at --read-wait
//        every answer of the handler carries DCM-Position: the position the read reflects
//   write ── handler ── 2xx? ─▶ + DCM-Position: everything this instance acknowledged, this write
//                                included
//
// A read never blocks an I/O thread: the server lets a handler answer later from any thread
// (src/http/server.h). Reads of no projection (GET /service-types) take no wait but still carry
// the header.
//
// Thread-safety: const after construction; the barrier is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "projections/read_barrier.h"
#include "src/http/http_types.h"

namespace dcm::http {

inline constexpr char kPositionHeader[] = "DCM-Position";
inline constexpr char kMinPositionParam[] = "min_position";

// The projections that serve an API read.
enum class ReadServedBy {
  kNothing,    // static configuration (service types)
  kProviders,  // the registry, with health joined in
  kInstances,  // the instance projection, with SP status joined in
  kAudit,      // /events, history, every `as_of`
};

// Which projections serve GET of `pattern` (a route pattern relative to the API base, e.g.
// "/providers/{id}/history"), with or without `as_of`.
ReadServedBy ReadServedByRoute(std::string_view pattern, bool as_of);

class ConsistentReads {
 public:
  // Runs the read, answering through the Respond it is given.
  using Run = std::function<void(const HttpRequest&, Respond)>;

  explicit ConsistentReads(ReadBarrier* barrier);

  // Serves the read `run` once this instance has caught up (see above).
  void Read(ReadServedBy served, HttpRequest request, Respond respond, Run run) const;

  // `respond`, adding the acknowledged position to a 2xx answer.
  Respond Write(Respond respond) const;

 private:
  uint32_t Mask(ReadServedBy served) const;

  ReadBarrier* barrier_;
  uint32_t providers_;
  uint32_t instances_;
  uint32_t audit_;
};

}  // namespace dcm::http
