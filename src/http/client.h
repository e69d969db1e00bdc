// HttpClient: a small synchronous HTTP/1.1 client for one origin, with one keep-alive
// connection. Used by sp-sim registration, tests and load tools. Beast stays in client.cc.
//
// Lifecycle: construct with a base URL; each Request connects on demand and reuses the
// connection while the server keeps it alive. A request on a reused connection that fails
// before any response byte (the server closed it while idle) is retried once on a new one.
//
// Every Request is bounded by its timeout as a whole (resolve, connect, write, read, and the
// one retry). Errors: kUnavailable (resolve/connect failure, refused, reset, bad response),
// kTimeout (deadline), kInvalidArgument (bad base URL, https: not supported yet).
//
// Thread-safety: not thread-safe; use one client per thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

class HttpClient {
 public:
  // `base_url`: "http://host:port" optionally followed by a path prefix, which is prepended
  // to every request target ("http://h:8080/api/v1alpha1" + "/providers").
  explicit HttpClient(std::string base_url);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `target` is a path and optional query starting with '/', or a query alone ("?id=x") or ""
  // to address the base URL itself ("http://h/api/vm" + "?id=x"). The body and its Content-Type are
  // sent when the body is not empty or the method is POST, PUT or PATCH. The response's
  // headers carry lower-cased names; content_type is its Content-Type (empty if none).
  Result<HttpResponse> Request(const std::string& method, const std::string& target,
                               const std::string& body = "",
                               const std::string& content_type = "application/json",
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Drops the kept-alive connection, if any.
  void Close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request to an absolute http:// URL on a fresh connection (JSON content type).
Result<HttpResponse> Fetch(const std::string& method, const std::string& url,
                           const std::string& body = "",
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace dcm::http
