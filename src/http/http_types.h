// The HTTP boundary as plain data. Handlers see only these types (no Beast), so they are pure
// functions that tests call without sockets (STYLE: handler / params / render split).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/common/principal.h"

namespace dcm::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // raw request target, e.g. "/api/v1alpha1/providers?type=vm"
  std::string path;    // percent-decoded path without the query, e.g. "/api/v1alpha1/providers"
  std::multimap<std::string, std::string> query;  // percent-decoded query parameters
  std::map<std::string, std::string> headers;     // lower-cased names
  std::string body;
  // Set by the server on an mTLS connection whose client certificate verified against the
  // client CA: the certificate's subject (SAN URI, else SAN DNS, else CN). Empty otherwise.
  std::string peer_subject;
  // Set by the authentication layer (src/http/auth.h) before the request is routed.
  Principal principal;

  // First value of a query parameter, or nullptr.
  const std::string* Query(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? nullptr : &it->second;
  }
  const std::string* Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

class ResponseStream;  // response_stream.h

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Location, ...)
  // A streamed body (SPEC §9 watches): when set, `body` is ignored and the server sends what the
  // producer writes to it, as it comes, until the stream ends; the connection then closes.
  std::shared_ptr<ResponseStream> stream = {};
};

// A handler that answers with this status gets nothing written back: the server closes the
// connection instead, as a crashed peer would (sp-sim's `refuse` fault on a shared port, where
// closing the listener would refuse every provider behind it).
inline constexpr int kCloseWithoutResponse = -1;

// Called exactly once per request, from any thread.
using Respond = std::function<void(HttpResponse)>;

// A handler answers at once (calls respond before returning) or later (keeps `respond` and calls
// it from another thread, e.g. after a Kafka outcome is applied). Must not throw.
using Handler = std::function<void(HttpRequest, Respond)>;

}  // namespace dcm::http
