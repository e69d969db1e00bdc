// Calls a router (or any Handler) the way the server would, without sockets: builds the plain
// HttpRequest from a target ("/api/v1alpha1/providers?x=1"), checks that the handler answers
// exactly once, and returns the answer (status -1 if it never answered).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "src/http/http_types.h"

namespace dcm::http {

inline HttpResponse CallRouter(const Handler& router, const std::string& method,
                               const std::string& target, const std::string& body,
                               std::map<std::string, std::string> headers) {
  HttpRequest req;
  req.method = method;
  req.target = target;
  const auto q = target.find('?');
  req.path = target.substr(0, q);
  if (q != std::string::npos) {
    std::string rest = target.substr(q + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t amp = rest.find('&', start);
      if (amp == std::string::npos) amp = rest.size();
      std::string pair = rest.substr(start, amp - start);
      if (!pair.empty()) {
        const auto eq = pair.find('=');
        req.query.emplace(pair.substr(0, eq), eq == std::string::npos ? "" : pair.substr(eq + 1));
      }
      start = amp + 1;
    }
  }
  req.headers = std::move(headers);
  req.body = body;
  std::optional<HttpResponse> captured;
  int calls = 0;
  router(std::move(req), [&](HttpResponse r) {
    ++calls;
    captured = std::move(r);
  });
  EXPECT_EQ(calls, 1) << method << " " << target << ": respond must be called exactly once";
  return captured.value_or(HttpResponse{-1, "", "", {}});
}

}  // namespace dcm::http
