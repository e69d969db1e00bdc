#include "src/auth/oidc_keys.h"

#include <simdjson.h>

#include "src/auth/json_util.h"
#include "src/common/log.h"
#include "src/common/url.h"

namespace dcm::auth {
namespace {

std::string DiscoveryUrl(std::string_view issuer) {
  while (issuer.ends_with('/')) issuer.remove_suffix(1);
  return std::string(issuer) + "/.well-known/openid-configuration";
}

tl::unexpected<Error> Unavailable(std::string message) {
  return MakeError(ErrorCode::kUnavailable, std::move(message));
}

Result<std::string> FetchBounded(const HttpFetch& fetch, const std::string& url) {
  auto body = fetch(url);
  if (!body) return Unavailable("issuer unreachable: GET " + url + ": " + body.error().message);
  if (body->size() > kMaxJwksBytes) {
    return Unavailable("GET " + url + ": answer is larger than 1 MiB");
  }
  return body;
}

}  // namespace

Result<std::unique_ptr<OidcKeys>> OidcKeys::Create(OidcKeysOptions options, HttpFetch fetch) {
  auto url = ParseHttpUrl(options.issuer);
  if (!url) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AUTH_ISSUER_URL '" + options.issuer + "': " + url.error().message);
  }
  if (options.refresh_interval_ms <= 0 || options.min_refresh_interval_ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "OIDC key refresh intervals must be positive");
  }
  if (!fetch) return MakeError(ErrorCode::kInvalidArgument, "OidcKeys needs an HTTP fetch");
  return std::unique_ptr<OidcKeys>(new OidcKeys(std::move(options), std::move(fetch)));
}

OidcKeys::OidcKeys(OidcKeysOptions options, HttpFetch fetch)
    : options_(std::move(options)),
      fetch_(std::move(fetch)),
      discovery_url_(DiscoveryUrl(options_.issuer)) {}

OidcKeys::~OidcKeys() { StopRefreshThread(); }

Status OidcKeys::Start(int64_t now_ms) {
  std::lock_guard lock(refresh_mu_);
  return Refresh(now_ms);
}

void OidcKeys::Tick(int64_t now_ms) {
  std::lock_guard lock(refresh_mu_);
  if (last_attempt_ms_) {
    const int64_t wait =
        last_failed_ ? options_.min_refresh_interval_ms : options_.refresh_interval_ms;
    if (now_ms - *last_attempt_ms_ < wait) return;
  }
  static_cast<void>(Refresh(now_ms));  // logged by Refresh; the old keys stay
}

bool OidcKeys::RefreshForUnknownKey(uint64_t seen_generation, int64_t now_ms) {
  if (background_.load()) {
    {
      std::lock_guard lock(thread_mu_);
      refresh_requested_ = true;
    }
    thread_cv_.notify_all();
    return false;
  }
  std::lock_guard lock(refresh_mu_);
  if (holder_.Generation() != seen_generation) return true;  // refreshed while we waited
  if (last_attempt_ms_ && now_ms - *last_attempt_ms_ < options_.min_refresh_interval_ms) {
    return false;
  }
  static_cast<void>(Refresh(now_ms));
  return holder_.Generation() != seen_generation;
}

int64_t OidcKeys::RequestedRefresh(int64_t now_ms) {
  std::lock_guard lock(refresh_mu_);
  if (last_attempt_ms_ && now_ms - *last_attempt_ms_ < options_.min_refresh_interval_ms) {
    return options_.min_refresh_interval_ms - (now_ms - *last_attempt_ms_);
  }
  static_cast<void>(Refresh(now_ms));  // logged by Refresh
  return 0;
}

Status OidcKeys::Refresh(int64_t now_ms) {
  last_attempt_ms_ = now_ms;
  ++attempts_;
  auto jwks = FetchJwks();
  last_failed_ = !jwks;
  auto logger = Logger("auth");
  if (!jwks) {
    jwks_uri_.clear();  // discover again next time: the jwks_uri may have moved
    holder_.MarkUnavailable(jwks.error().message);
    logger->warn(
        "msg=\"signing key refresh failed; keeping the current keys\" issuer=\"{}\" "
        "error=\"{}\"",
        options_.issuer, jwks.error().message);
    return tl::unexpected(jwks.error());
  }
  if (jwks->warnings != warnings_) {  // once per change, not every refresh_interval
    for (const auto& warning : jwks->warnings) {
      logger->warn("msg=\"JWKS key skipped\" jwks_uri=\"{}\" why=\"{}\"", jwks_uri_, warning);
    }
    warnings_ = std::move(jwks->warnings);
  }
  const size_t count = jwks->keys.size();
  if (holder_.Publish(std::move(jwks->keys))) {
    logger->info("msg=\"signing keys loaded\" jwks_uri=\"{}\" keys={} generation={}", jwks_uri_,
                 count, holder_.Generation());
  }
  return OkStatus();
}

Result<std::string> OidcKeys::Discover() {
  ASSIGN_OR_RETURN(std::string body, FetchBounded(fetch_, discovery_url_));
  auto root = ParseJson(body);
  simdjson::dom::object document;
  if (!root || root->get(document)) {
    return Unavailable("discovery document " + discovery_url_ + " is not a JSON object");
  }
  auto issuer = Member(document, "issuer");
  std::string_view issuer_text;
  if (!issuer || issuer->get(issuer_text) || issuer_text != options_.issuer) {
    return Unavailable("discovery document " + discovery_url_ + " names issuer '" +
                       Printable(issuer_text, 256) + "', not AUTH_ISSUER_URL '" + options_.issuer +
                       "'");
  }
  auto jwks_uri = Member(document, "jwks_uri");
  std::string_view uri;
  if (!jwks_uri || jwks_uri->get(uri) || !ParseHttpUrl(uri)) {
    return Unavailable("discovery document " + discovery_url_ + " has no valid jwks_uri");
  }
  return std::string(uri);
}

Result<Jwks> OidcKeys::FetchJwks() {
  if (jwks_uri_.empty()) {
    ASSIGN_OR_RETURN(jwks_uri_, Discover());
  }
  ASSIGN_OR_RETURN(std::string body, FetchBounded(fetch_, jwks_uri_));
  auto jwks = ParseJwks(body);
  if (!jwks) return Unavailable("invalid JWKS at " + jwks_uri_ + ": " + jwks.error().message);
  return jwks;
}

void OidcKeys::StartRefreshThread(const Clock& clock, std::chrono::milliseconds period) {
  std::lock_guard lock(thread_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  background_ = true;
  thread_ = std::thread([this, &clock, period] { RefreshLoop(clock, period); });
}

void OidcKeys::RefreshLoop(const Clock& clock, std::chrono::milliseconds period) {
  std::unique_lock lock(thread_mu_);
  bool pending = false;  // an unknown key id asked for a refresh the rate limit still holds
  std::chrono::milliseconds wait = period;
  // A first Tick at once, then one per period, or a refresh when an unknown key id asks.
  do {
    pending = std::exchange(refresh_requested_, false) || pending;
    lock.unlock();
    wait = period;
    if (pending) {
      const int64_t allowed_in = RequestedRefresh(clock.NowMillis());
      pending = allowed_in > 0;
      if (pending) wait = std::min(wait, std::chrono::milliseconds(allowed_in));
    } else {
      Tick(clock.NowMillis());
    }
    lock.lock();
  } while (!thread_cv_.wait_for(lock, wait, [this] { return stop_ || refresh_requested_; }) ||
           !stop_);
}

void OidcKeys::StopRefreshThread() {
  std::thread thread;
  background_ = false;
  {
    std::lock_guard lock(thread_mu_);
    stop_ = true;
    thread = std::move(thread_);
  }
  thread_cv_.notify_all();
  if (thread.joinable()) thread.join();
}

uint64_t OidcKeys::refresh_attempts() const { return attempts_.load(); }

}  // namespace dcm::auth
