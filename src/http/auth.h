// The trust boundary at the HTTP edge (SPEC §6): who is calling (authentication) and whether
// they may make this call (authorization). The router (router.h) runs both before any handler,
// from one table: every route names its Access next to its method and path.
//
//   request ──open route (/healthz, /readyz)? ──────────────────────────────▶ handler
//      │ else
//      ▼ auth::Authenticator (bearer JWT, or the mTLS peer subject; null = auth disabled)
//   401 + WWW-Authenticate  ◀── no or bad credentials (auth::BearerChallenge)
//      ▼ route's Access: roles, provider ownership, ?force=true needs dcm-admin
//   403 problem+json  ◀── valid caller without the right
//      ▼
//   handler (request.principal set: its `subject` is the `actor` of the events it causes)
//
// A 401 or 403 of the router never produces an event or changes state (a 403 the registrar
// decides, on a request that reached it, is recorded as a rejection); it is logged and counted
// (dcm_http_auth_denied_total{status,reason}: reason is "no_credentials", an
// auth::AuthFailureKindName such as "expired", or "role" / "owner" for a 403).
#pragma once

#include <string>
#include <string_view>

#include "src/auth/authenticator.h"
#include "src/common/metrics.h"
#include "src/common/principal.h"

namespace dcm::http {

// Who may make a call (SPEC §6). Every role may read; the write rights are disjoint.
enum class Access {
  kOpen,            // /healthz, /readyz: no credentials needed
  kMetrics,         // /metrics: like kRead, or open with METRICS_PUBLIC=true
  kRead,            // any GET: any of dcm-reader, dcm-provider, dcm-user, dcm-admin (not
                    // dcm-peer: peers call only /federation/v1alpha1/*)
  kRegister,        // POST /providers: dcm-provider or dcm-admin (a re-registration of a
                    // provider it does not own is refused by the registrar)
  kOwnProvider,     // change provider {id}: dcm-admin, or dcm-provider owning it
  kDeleteProvider,  // kOwnProvider; with ?force=true only dcm-admin
  kInstances,       // catalog item instances and resources: dcm-user or dcm-admin
  kAdmin,           // service-type instances, cleanup :retry, /admin/*: dcm-admin
  kPeer,            // /federation/v1alpha1/* (SPEC §10): dcm-peer only (not even dcm-admin)
};

struct AccessContext {
  // Null: authentication disabled (`--dev`, or AUTH_DISABLED=true): every caller is
  // "anonymous" with every role.
  const auth::Authenticator* authenticator = nullptr;
  // METRICS_PUBLIC=true: /metrics needs no credentials.
  bool metrics_public = false;
  Metrics* metrics = nullptr;  // counts denials when set
};

// The principal of every request while authentication is disabled.
Principal AnonymousPrincipal();

}  // namespace dcm::http
