// What the hermetic handler tests share: CallRouter calls a router (or any Handler) the way the
// server would, without sockets (builds the plain HttpRequest from a target such as
// "/api/v1alpha1/providers?x=1", checks that the handler answers exactly once, returns the answer,
// status -1 if it never answered); JsonBody reads the answer.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// A parsed JSON response body (the parser owns the document).
struct JsonBody {
  std::unique_ptr<simdjson::dom::parser> parser = std::make_unique<simdjson::dom::parser>();
  simdjson::dom::element root;

  std::string Str(std::string_view key) const {
    std::string_view v;
    if (root[key].get(v)) return "<missing " + std::string(key) + ">";
    return std::string(v);
  }
  int64_t Int(std::string_view key) const {
    int64_t v = -1;
    if (root[key].get(v)) return -1;
    return v;
  }
  bool Has(std::string_view key) const { return !root[key].error(); }
  bool IsNull(std::string_view key) const {
    simdjson::dom::element e;
    return !root[key].get(e) && e.is_null();
  }
  // The minified JSON of member `key`.
  std::string Raw(std::string_view key) const {
    simdjson::dom::element e;
    if (root[key].get(e)) return "<missing " + std::string(key) + ">";
    return simdjson::minify(e);
  }
  std::vector<std::string> ErrorFields() const {
    std::vector<std::string> out;
    simdjson::dom::array errors;
    if (root["errors"].get(errors)) return out;
    for (auto e : errors) {
      std::string_view f;
      if (!e["field"].get(f)) out.emplace_back(f);
    }
    return out;
  }
  // The string `field` of every element of the array `key`.
  std::vector<std::string> Column(std::string_view key, std::string_view field) const {
    std::vector<std::string> out;
    simdjson::dom::array items;
    if (root[key].get(items)) return {"<missing " + std::string(key) + ">"};
    for (auto item : items) {
      std::string_view v;
      out.emplace_back(item[field].get(v) ? "<missing>" : std::string(v));
    }
    return out;
  }
};

inline JsonBody Parse(const HttpResponse& response) {
  JsonBody body;
  auto error = body.parser->parse(response.body).get(body.root);
  EXPECT_FALSE(error) << "unparsable body: " << response.body;
  return body;
}

inline const std::string* FindHeader(const HttpResponse& response, const std::string& name) {
  for (const auto& [k, v] : response.headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace dcm::http
