#include "src/http/ui_handlers.h"

#include <cstdint>
#include <string>
#include <utility>

#include "src/http/ui_files.h"

namespace dcm::http {
namespace {

// 'self' only: the console's modules, stylesheet and API calls are same-origin; no inline
// script or style (the console uses none), no plugins, no framing, no <base> tricks.
constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

// A strong validator from the bytes (FNV-1a 64): the files change only with the binary.
std::string ETagOf(std::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag = "\"";
  for (int shift = 60; shift >= 0; shift -= 4) tag += kHex[(hash >> shift) & 0xf];
  return tag + "\"";
}

void AddCommonHeaders(HttpResponse& r) {
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Content-Security-Policy", std::string(kContentSecurityPolicy));
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
}

HttpResponse Plain(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  AddCommonHeaders(r);
  return r;
}

const EmbeddedFile* Find(std::string_view path) {
  for (const EmbeddedFile& f : ConsoleFiles()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

// Whether an If-None-Match header names `etag` ("*", or a list that contains it).
bool Matches(const std::string* if_none_match, const std::string& etag) {
  if (!if_none_match) return false;
  if (*if_none_match == "*") return true;
  return if_none_match->find(etag) != std::string::npos;
}

HttpResponse ServeFile(const EmbeddedFile& file, const HttpRequest& request) {
  HttpResponse r;
  const std::string etag = ETagOf(file.bytes);
  r.content_type = std::string(file.content_type);
  if (Matches(request.Header("if-none-match"), etag)) {
    r.status = 304;
    r.content_type.clear();
  } else {
    r.body = std::string(file.bytes);
  }
  r.headers.emplace_back("ETag", etag);
  r.headers.emplace_back("Cache-Control", "no-cache");
  AddCommonHeaders(r);
  return r;
}

}  // namespace

bool IsConsolePath(std::string_view path) {
  return path == kConsolePath ||
         (path.starts_with(kConsolePath) && path[kConsolePath.size()] == '/');
}

HttpResponse ServeConsole(const HttpRequest& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = Plain(405, "method not allowed\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (request.path == kConsolePath) {
    HttpResponse r = Plain(301, "moved to /ui/\n");
    r.headers.emplace_back("Location", "/ui/");
    return r;
  }
  std::string_view file = std::string_view(request.path).substr(kConsolePath.size() + 1);
  if (file.empty()) file = "index.html";
  const EmbeddedFile* found = Find(file);
  if (!found) return Plain(404, "no such console file: " + std::string(file) + "\n");
  return ServeFile(*found, request);
}

Handler WithConsole(Handler api) {
  return [api = std::move(api)](HttpRequest request, Respond respond) {
    if (IsConsolePath(request.path)) return respond(ServeConsole(request));
    api(std::move(request), std::move(respond));
  };
}

}  // namespace dcm::http
