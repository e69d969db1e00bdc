// HttpServiceProviderApi and HttpPolicyEngine over HttpClient (no Beast here), with a per-thread
// keep-alive cache keyed by origin.
#include "src/http/placement_clients.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/reply_summary.h"
#include "src/common/url.h"
#include "src/http/client.h"

namespace dcm::http {
namespace {

// Longer than any provider name (1..63 characters, SPEC §3.1) with a wide margin.
constexpr size_t kMaxSelectedProviderBytes = 128;

// Where a request goes: the origin (with the options, the cache key) and the target on it.
struct Target {
  std::string origin;  // "http://host:port" or "https://host:port"
  std::string raw;     // path and query as given, at least "/"
  std::string path;    // without query and trailing '/', may be empty
};

Result<Target> SplitUrl(const std::string& url, std::string_view what) {
  auto parsed = ParseHttpUrl(url);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(what) + " '" + url + "' " + parsed.error().message);
  }
  Target t;
  const std::string host =
      parsed->host.find(':') != std::string::npos ? "[" + parsed->host + "]" : parsed->host;
  t.origin = parsed->scheme + "://" + host + ":" + std::to_string(parsed->port);
  t.raw = parsed->target;
  t.path = parsed->target.substr(0, parsed->target.find('?'));
  while (!t.path.empty() && t.path.back() == '/') t.path.pop_back();
  return t;
}

// The per-thread connection cache: at most kMaxCachedOrigins clients, least recently used out.
// Keyed by origin and by the options' identity: a client keeps its options' policy and TLS
// context alive, so their addresses cannot be reused by other options while it is cached.
HttpClient& ClientFor(const std::string& origin, const HttpClientOptions& options) {
  struct Entry {
    std::string origin;
    const void* outbound = nullptr;
    const void* tls = nullptr;
    uint64_t max_response_bytes = 0;
    std::unique_ptr<HttpClient> client;
    uint64_t last_used = 0;
  };
  thread_local std::vector<Entry> cache;
  thread_local uint64_t tick = 0;
  ++tick;
  for (auto& e : cache) {
    if (e.origin == origin && e.outbound == options.outbound.get() && e.tls == options.tls.get() &&
        e.max_response_bytes == options.max_response_bytes) {
      e.last_used = tick;
      return *e.client;
    }
  }
  if (cache.size() >= kMaxCachedOrigins) {
    size_t oldest = 0;
    for (size_t i = 1; i < cache.size(); ++i) {
      if (cache[i].last_used < cache[oldest].last_used) oldest = i;
    }
    cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(oldest));
  }
  cache.push_back(Entry{origin, options.outbound.get(), options.tls.get(),
                        options.max_response_bytes, std::make_unique<HttpClient>(origin, options),
                        tick});
  return *cache.back().client;
}

// One request on the cached connection to `t.origin`. Transport errors become kTimeout or
// kUnavailable (the ports' contract), whatever HttpClient called them.
Result<HttpResponse> Send(const Target& t, const HttpClientOptions& options,
                          const std::string& method, const std::string& target,
                          const std::string& body, std::chrono::milliseconds timeout) {
  auto res =
      ClientFor(t.origin, options).Request(method, target, body, "application/json", timeout);
  if (res) return res;
  const ErrorCode code =
      res.error().code == ErrorCode::kTimeout ? ErrorCode::kTimeout : ErrorCode::kUnavailable;
  return MakeError(code, res.error().message);
}

// `spec_json` minified, or kInvalidArgument if it is not a JSON value.
Result<std::string> MinifiedSpec(const std::string& spec_json) {
  auto parsed = ParseJson(spec_json);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "spec is not valid JSON: " + parsed.error().message);
  }
  return Minify(*parsed);
}

// A 406/409 reply's explanation (problem+json `detail`, else `title`, ...), sanitized and
// bounded; else what the reply was ("HTTP 406 (empty body)").
std::string ExplainRefusal(const HttpResponse& res) {
  std::string detail = ReplyExplanation(res.content_type, res.body);
  if (!detail.empty()) return detail;
  return SummarizeReply(res.status, res.content_type, res.body);
}

// "500: boom", "502 (1,234 bytes of text/html)": SummarizeReply without its "HTTP " prefix.
std::string StatusSummary(const HttpResponse& res) {
  return SummarizeReply(res.status, res.content_type, res.body).substr(5);
}

Error ShapeError(const std::string& url, const std::string& why) {
  return Error{ErrorCode::kUnavailable,
               "policy manager at " + url +
                   " answered 200 with a body that is not the contract's shape: " + why,
               {}};
}

// Parses the 200 body into an approved decision (`original_spec` when no evaluated spec).
Result<PolicyDecision> ReadApproval(const std::string& url, const std::string& body,
                                    const std::string& original_spec) {
  auto parsed = ParseJson(body);
  if (!parsed) return tl::unexpected(ShapeError(url, parsed.error().message));
  simdjson::dom::object object;
  if (parsed->get(object)) {
    return tl::unexpected(
        ShapeError(url, std::string("a JSON ") + JsonTypeName(*parsed) + ", not an object"));
  }
  PolicyDecision decision;
  decision.verdict = PolicyDecision::Verdict::kApproved;
  decision.spec = original_spec;
  auto evaluated = Member(object, "evaluated_service_instance", "evaluatedServiceInstance");
  if (evaluated && !evaluated->is_null()) {
    simdjson::dom::object instance;
    if (evaluated->get(instance)) {
      return tl::unexpected(ShapeError(url, "evaluated_service_instance is not an object"));
    }
    auto spec = Member(instance, "spec");
    if (spec && !spec->is_null()) {
      if (!spec->is_object()) {
        return tl::unexpected(ShapeError(url, "evaluated_service_instance.spec is not an object"));
      }
      decision.spec = Minify(*spec);
    }
  }
  auto selected = Member(object, "selected_provider", "selectedProvider");
  if (selected && !selected->is_null()) {
    std::string_view name;
    if (selected->get(name)) {
      return tl::unexpected(ShapeError(url, "selected_provider is not a string"));
    }
    if (SanitizeText(name, kMaxSelectedProviderBytes) != name) {
      return tl::unexpected(ShapeError(url, "selected_provider is not a provider name (" +
                                                std::to_string(name.size()) +
                                                " bytes, or blanks or control characters)"));
    }
    decision.selected_provider = std::string(name);
  }
  auto status = Member(object, "status");
  if (status && !status->is_null()) {
    std::string_view text;
    decision.status = SanitizeText(status->get(text) ? Minify(*status) : std::string(text),
                                   kMaxReplySummaryBytes);
  }
  return decision;
}

}  // namespace

std::string PercentEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

// ---- HttpServiceProviderApi -------------------------------------------------------------------

HttpServiceProviderApi::HttpServiceProviderApi(std::chrono::milliseconds timeout,
                                               HttpClientOptions options)
    : timeout_(timeout), options_(std::move(options)) {
  options_.max_response_bytes = std::min(options_.max_response_bytes, kMaxSpReplyBytes);
}

Result<SpReply> HttpServiceProviderApi::CreateInstance(const std::string& endpoint,
                                                       const std::string& instance_id,
                                                       const std::string& spec_json) {
  ASSIGN_OR_RETURN(Target t, SplitUrl(endpoint, "SP endpoint"));
  ASSIGN_OR_RETURN(std::string spec, MinifiedSpec(spec_json));
  JsonWriter w;
  w.BeginObject();
  w.Key("spec");
  w.Raw(spec);
  w.EndObject();
  ASSIGN_OR_RETURN(
      HttpResponse res,
      Send(t, options_, "POST", t.path + "?id=" + PercentEncode(instance_id), w.Take(), timeout_));
  return SpReply{res.status, std::move(res.body), std::move(res.content_type)};
}

Result<SpReply> HttpServiceProviderApi::DeleteInstance(const std::string& endpoint,
                                                       const std::string& instance_id) {
  ASSIGN_OR_RETURN(Target t, SplitUrl(endpoint, "SP endpoint"));
  ASSIGN_OR_RETURN(HttpResponse res, Send(t, options_, "DELETE",
                                          t.path + "/" + PercentEncode(instance_id), "", timeout_));
  return SpReply{res.status, std::move(res.body), std::move(res.content_type)};
}

// ---- HttpPolicyEngine ---------------------------------------------------------------------

HttpPolicyEngine::HttpPolicyEngine(std::string evaluation_url, std::chrono::milliseconds timeout,
                                   HttpClientOptions options)
    : url_(std::move(evaluation_url)), timeout_(timeout), options_(std::move(options)) {}

Result<PolicyDecision> HttpPolicyEngine::Evaluate(const std::string& spec_json) {
  ASSIGN_OR_RETURN(Target t, SplitUrl(url_, "policy manager URL"));
  ASSIGN_OR_RETURN(std::string spec, MinifiedSpec(spec_json));
  JsonWriter w;
  w.BeginObject();
  w.Key("service_instance");
  w.BeginObject();
  w.Key("spec");
  w.Raw(spec);
  w.EndObject();
  w.EndObject();
  // The URL's path and query as given.
  auto res = Send(t, options_, "POST", t.raw, w.Take(), timeout_);
  if (!res) {
    return MakeError(res.error().code, "policy manager: " + res.error().message);
  }
  switch (res->status) {
    case 200:
      return ReadApproval(url_, res->body, spec);
    case 406:
    case 409: {
      PolicyDecision decision;
      decision.verdict = res->status == 406 ? PolicyDecision::Verdict::kRejected
                                            : PolicyDecision::Verdict::kConflict;
      decision.detail = ExplainRefusal(*res);
      return decision;
    }
    default:
      return MakeError(ErrorCode::kUnavailable,
                       "policy manager at " + url_ + " answered " + StatusSummary(*res));
  }
}

}  // namespace dcm::http
