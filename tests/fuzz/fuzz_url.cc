// Fuzz target: provider endpoints (SPEC §3.1) through ParseHttpUrl and JoinUrlPath. An accepted
// URL must be one the HTTP client can use: http(s), a host, a non-zero port, a target that
// starts with '/', no fragment, no whitespace.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/common/url.h"
#include "tests/fuzz/fuzz_check.h"

namespace dcm::fuzz {

std::vector<std::string> Seeds() {
  return {"http://sp.example.com/api",
          "https://sp.example.com:8443/api/v1?x=1#frag",
          "HTTP://H:80",
          "http://[::1]:9000/health",
          "http://[2001:db8::1]",
          "http://u:p@h/",
          "ftp://h/",
          "http://h:65536/",
          "http://:80/",
          "http://h:/",
          "/relative",
          "http://h?q",
          "http://h/" + std::string(2040, 'a')};
}

}  // namespace dcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto url = dcm::ParseHttpUrl(input);
  if (url) {
    FUZZ_CHECK(url->scheme == "http" || url->scheme == "https");
    FUZZ_CHECK(!url->host.empty());
    FUZZ_CHECK(url->port != 0);
    FUZZ_CHECK(!url->target.empty() && url->target.front() == '/');
    FUZZ_CHECK(url->target.find('#') == std::string::npos);
    FUZZ_CHECK(input.size() <= dcm::kMaxEndpointLength);
    for (unsigned char c : url->host + url->target) FUZZ_CHECK(c > 0x20 && c != 0x7F);
  } else {
    FUZZ_CHECK(url.error().code == dcm::ErrorCode::kInvalidArgument);
  }
  const std::string joined = dcm::JoinUrlPath(input, "/health");
  FUZZ_CHECK(joined.size() >= 7 && joined.ends_with("/health"));
  return 0;
}
