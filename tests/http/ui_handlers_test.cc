// The console's static files (SPEC §9): served from the table built into the binary, public,
// with nosniff, a strict CSP and revalidation. Pure handler calls, no sockets.
#include "src/http/ui_handlers.h"

#include <gtest/gtest.h>

#include "src/http/ui_files.h"

namespace dcm::http {
namespace {

HttpRequest Get(const std::string& path, const std::string& method = "GET") {
  HttpRequest r;
  r.method = method;
  r.path = path;
  r.target = path;
  return r;
}

const std::string* Header(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

TEST(UiHandlersTest, EmbedsTheConsoleFilesWithTheirTypes) {
  bool index = false, module = false, css = false;
  for (const EmbeddedFile& f : ConsoleFiles()) {
    EXPECT_FALSE(f.bytes.empty()) << f.path;
    if (f.path == "index.html") index = f.content_type == "text/html; charset=utf-8";
    if (f.path.ends_with(".js")) module = f.content_type == "text/javascript; charset=utf-8";
    if (f.path.ends_with(".css")) css = f.content_type == "text/css; charset=utf-8";
  }
  EXPECT_TRUE(index && module && css);
}

TEST(UiHandlersTest, RedirectsTheBarePathToTheDirectory) {
  HttpResponse r = ServeConsole(Get("/ui"));
  EXPECT_EQ(r.status, 301);
  ASSERT_NE(Header(r, "Location"), nullptr);
  EXPECT_EQ(*Header(r, "Location"), "/ui/");
}

TEST(UiHandlersTest, ServesIndexAtTheDirectoryWithStrictHeaders) {
  HttpResponse r = ServeConsole(Get("/ui/"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<!doctype html>"), std::string::npos);
  ASSERT_NE(Header(r, "X-Content-Type-Options"), nullptr);
  EXPECT_EQ(*Header(r, "X-Content-Type-Options"), "nosniff");
  ASSERT_NE(Header(r, "Content-Security-Policy"), nullptr);
  EXPECT_TRUE(Header(r, "Content-Security-Policy")->starts_with("default-src 'self'"));
  ASSERT_NE(Header(r, "Cache-Control"), nullptr);
  EXPECT_EQ(*Header(r, "Cache-Control"), "no-cache");
  EXPECT_EQ(ServeConsole(Get("/ui/index.html")).body, r.body);
}

TEST(UiHandlersTest, AnswersNotModifiedForTheSameETag) {
  HttpResponse first = ServeConsole(Get("/ui/"));
  ASSERT_NE(Header(first, "ETag"), nullptr);
  HttpRequest again = Get("/ui/");
  again.headers["if-none-match"] = *Header(first, "ETag");
  HttpResponse r = ServeConsole(again);
  EXPECT_EQ(r.status, 304);
  EXPECT_TRUE(r.body.empty());
  again.headers["if-none-match"] = "\"other\"";
  EXPECT_EQ(ServeConsole(again).status, 200);
}

TEST(UiHandlersTest, UnknownFilesAre404AndWritesAre405) {
  EXPECT_EQ(ServeConsole(Get("/ui/nope.js")).status, 404);
  EXPECT_EQ(ServeConsole(Get("/ui/../src/main.cc")).status, 404);
  HttpResponse r = ServeConsole(Get("/ui/", "POST"));
  EXPECT_EQ(r.status, 405);
  ASSERT_NE(Header(r, "Allow"), nullptr);
  EXPECT_EQ(*Header(r, "X-Content-Type-Options"), "nosniff");
}

TEST(UiHandlersTest, OnlyConsolePathsBypassTheApi) {
  EXPECT_TRUE(IsConsolePath("/ui"));
  EXPECT_TRUE(IsConsolePath("/ui/"));
  EXPECT_TRUE(IsConsolePath("/ui/js/app.js"));
  EXPECT_FALSE(IsConsolePath("/uix"));
  EXPECT_FALSE(IsConsolePath("/api/v1alpha1/providers"));
  int api_calls = 0;
  Handler h = WithConsole([&](HttpRequest, Respond respond) {
    ++api_calls;
    HttpResponse unauthorized;
    unauthorized.status = 401;
    respond(unauthorized);
  });
  int status = 0;
  h(Get("/ui/"), [&](HttpResponse r) { status = r.status; });
  EXPECT_EQ(status, 200);
  EXPECT_EQ(api_calls, 0);
  h(Get("/api/v1alpha1/providers"), [&](HttpResponse r) { status = r.status; });
  EXPECT_EQ(status, 401);
  EXPECT_EQ(api_calls, 1);
}

}  // namespace
}  // namespace dcm::http
