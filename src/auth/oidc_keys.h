// OidcKeys: the signing keys of an OpenID Connect issuer (AUTH_ISSUER_URL, SPEC §6), found by
// OIDC Discovery: GET {issuer}/.well-known/openid-configuration, whose `issuer` must equal the
// configured issuer exactly (OIDC Discovery §4.3), then GET its `jwks_uri`.
//
// Refresh (one at a time, under a mutex; a failed refresh keeps the keys it had and is logged
// as a warning, component "auth"):
//
//   Start(now) ──> refresh ──ok──> keys (generation 1) ──Tick: refresh_interval since the last
//                     │                    ▲                attempt──> refresh
//                     │ failed             └──── token with an unknown kid, and
//                     ▼                          min_refresh_interval since the last attempt
//   no keys, "issuer unreachable: ...": tokens get 401 "signing keys not loaded (...)";
//   Tick retries every min_refresh_interval until a refresh succeeds
//
// The jwks_uri is kept between refreshes and discovered again after a failed JWKS fetch. A
// refresh that brings new keys bumps the generation: tokens signed with a new kid verify at
// once, tokens of a removed key stop verifying (the verifier's cache is keyed on it).
//
// Time comes from the callers (`now_ms`), so tests drive refreshes with a fake clock; in
// production StartRefreshThread runs Tick every second. The HTTP fetch is injected: it must
// bound its own time (connect and read timeouts), since a refresh on an unknown kid blocks the
// request that asked for it (and any other unknown-kid request, which then reuses its result).
//
// Thread-safety: all methods, from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/auth/key_source.h"
#include "src/common/clock.h"
#include "src/common/result.h"

namespace dcm::auth {

// GET `url`; the body of a 200 answer, or an error saying what failed. Must be thread-safe.
using HttpFetch = std::function<Result<std::string>(const std::string& url)>;

struct OidcKeysOptions {
  // AUTH_ISSUER_URL: the issuer, exactly as the discovery document and tokens spell it.
  std::string issuer{};
  // Keys are fetched again this long after the last attempt (ms): issuers publish a new key
  // well before signing with it, and an unknown kid triggers a refresh anyway. 5 min.
  int64_t refresh_interval_ms = 5 * 60 * 1000;
  // At most one refresh per this interval (ms), however many unknown-kid tokens arrive, so
  // forged kids cannot make us hammer the issuer; also the retry delay after a failure. 10 s.
  int64_t min_refresh_interval_ms = 10 * 1000;
};

class OidcKeys final : public KeySource {
 public:
  // kInvalidArgument when the issuer is not an http(s) URL or an interval is not positive.
  // Fetches nothing yet: call Start.
  static Result<std::unique_ptr<OidcKeys>> Create(OidcKeysOptions options, HttpFetch fetch);
  ~OidcKeys() override;  // StopRefreshThread()

  // The first refresh. Its status is for the caller to log: on failure the source still works
  // (no keys; 401 "signing keys not loaded (...)") and Tick keeps retrying.
  Status Start(int64_t now_ms);

  // Refreshes when one is due (see the diagram). For a periodic caller.
  void Tick(int64_t now_ms);

  // See KeySource. Without the refresh thread: refreshes unless one ran less than
  // min_refresh_interval ago (a caller that waited for another's refresh just looks again).
  // With it: never fetches on the caller's thread (an HTTP worker that serves many
  // connections): it asks the thread for a refresh as soon as the rate limit allows and returns
  // false at once, so that token gets its 401 and a retry after the refresh verifies.
  bool RefreshForUnknownKey(uint64_t seen_generation, int64_t now_ms) override;

  // Runs Tick(clock.NowMillis()) every `period` on a thread of its own, and the refreshes that
  // unknown key ids ask for, until StopRefreshThread. `clock` must outlive it.
  void StartRefreshThread(const Clock& clock,
                          std::chrono::milliseconds period = std::chrono::seconds(1));
  // Idempotent. Waits for a refresh in progress to finish.
  void StopRefreshThread();

  std::shared_ptr<const KeySnapshot> Keys() const override { return holder_.Current(); }
  uint64_t Generation() const override { return holder_.Generation(); }

  // Refreshes attempted so far (for tests and metrics).
  uint64_t refresh_attempts() const;

 private:
  OidcKeys(OidcKeysOptions options, HttpFetch fetch);

  // One refresh: discovery (unless the jwks_uri is known), JWKS, publish. Requires refresh_mu_.
  Status Refresh(int64_t now_ms);
  // The refresh an unknown key id asked for, on the refresh thread: 0 when it ran, else the ms
  // until the rate limit allows it.
  int64_t RequestedRefresh(int64_t now_ms);
  void RefreshLoop(const Clock& clock, std::chrono::milliseconds period);
  Result<std::string> Discover();
  Result<Jwks> FetchJwks();

  const OidcKeysOptions options_;
  const HttpFetch fetch_;
  const std::string discovery_url_;
  KeySetHolder holder_;

  mutable std::mutex refresh_mu_;           // held for a whole refresh
  std::string jwks_uri_;                    // guarded by refresh_mu_; "" = discover first
  std::optional<int64_t> last_attempt_ms_;  // guarded by refresh_mu_
  // Skipped-key warnings of the last JWKS (Keycloak publishes an encryption key too: logged
  // once, not at every refresh). Guarded by refresh_mu_.
  std::vector<std::string> warnings_;
  bool last_failed_ = false;  // guarded by refresh_mu_
  std::atomic<uint64_t> attempts_{0};

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_ = false;                    // guarded by thread_mu_
  bool refresh_requested_ = false;       // guarded by thread_mu_: an unknown kid asked
  std::atomic<bool> background_{false};  // the refresh thread runs
  std::thread thread_;
};

}  // namespace dcm::auth
