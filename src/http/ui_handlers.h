// The admin console at /ui/ (SPEC §9): static files built into the binary (ui_files.h), served
// without credentials. The console itself calls the API with the user's token, so the data
// keeps its authorization (router.h); the files hold no data.
//
//   GET /ui            -> 301 Location: /ui/
//   GET /ui/           -> index.html
//   GET /ui/<file>     -> the file, or 404
//   other methods      -> 405 (Allow: GET, HEAD)
//
// Every answer carries `X-Content-Type-Options: nosniff` and a strict Content-Security-Policy
// (`default-src 'self'`: no inline script or style, no other origin), and `Cache-Control:
// no-cache` with an ETag, so a browser revalidates (304) and an upgraded binary's console is
// picked up at once.
#pragma once

#include <string_view>

#include "src/http/http_types.h"

namespace dcm::http {

inline constexpr std::string_view kConsolePath = "/ui";

// Whether `path` is the console's (/ui or under /ui/).
bool IsConsolePath(std::string_view path);

// Pure: the answer to a request for a console path (IsConsolePath(request.path)).
HttpResponse ServeConsole(const HttpRequest& request);

// `api` with the console in front: console paths are answered by ServeConsole, without
// authentication; everything else goes to `api` unchanged.
Handler WithConsole(Handler api);

}  // namespace dcm::http
