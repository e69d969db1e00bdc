// Fuzz target: the outbound policy (SPEC §6) over operator CIDR lists and registered hosts, and
// the summary of SP replies shown to users. Input: "[!]ALLOW\nDENY\nHOST-OR-URL" ('!' = dev-mode
// loopback; ALLOW and DENY comma-separated CIDRs). Beyond "no crash, no hang":
//  - Create either succeeds or names the variable and the entry it refused;
//  - every CIDR that parses prints back to itself and contains its network;
//  - a strict IP literal prints and parses back to the same address, and is also a literal to
//    ParseLiteral (the resolver's forms);
//  - CheckLiteralHost of a host is exactly Check of its parsed literal ("" for names), so what
//    registration refuses is what the dialer refuses; the same for ParseHttpUrl's host;
//  - without explicit IPv6 rules, an IPv6 spelling of an IPv4 address is judged as that IPv4
//    address (no bypass by spelling);
//  - a refusal names the address and ends with "refused by the outbound policy";
//  - SummarizeReply of any body is at most 256 bytes of valid UTF-8 without control characters.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/outbound_policy.h"
#include "src/common/reply_summary.h"
#include "src/common/url.h"
#include "tests/fuzz/fuzz_check.h"

namespace dcm::fuzz {

std::vector<std::string> Seeds() {
  return {
      "\n\n127.0.0.1",
      "!\n\nlocalhost",
      "127.0.0.0/8\n\nhttp://127.1:8080/api",
      "\n10.0.0.0/8\n::ffff:10.1.2.3",
      "10.1.0.0/16\n10.0.0.0/8\n64:ff9b::a01:203",
      "169.254.0.0/16\n\n169.254.169.254",
      "\n::/0,0.0.0.0/0\nhttp://[fe80::1%25eth0]:80/",
      "10.0.0.1/8\n\n0x7f000001",
      "\n2001:db8::/32\n0177.0.0.1",
      "fd00:ec2::254\n\nhttp://[fd00:ec2::254]/latest",
      "1.2.3.4/33,::/129,bad\n\n2130706433",
      "\n\n::127.0.0.1",
      "text/plain\n\n{\"detail\":\"\\u001b[2Jhello\\u202e\"}",
      "application/problem+json\n\n{\"title\":\"x\",\"detail\":\"" + std::string(300, 'd') + "\"}",
  };
}

}  // namespace dcm::fuzz

namespace {

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    out.emplace_back(text.substr(start, end - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ValidUtf8WithoutControls(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || i + len > s.size() || c > 0xF4) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    if (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) return false;  // C1 controls
    i += len;
  }
  return true;
}

bool IsRefusal(const std::string& reason, const dcm::IpAddress& address) {
  return reason.starts_with(address.ToString() + " ") &&
         reason.ends_with("refused by the outbound policy");
}

// CheckLiteralHost(host) agrees with Check of the literal the resolver would read in it.
void CheckHost(const dcm::OutboundPolicy& policy, std::string_view host) {
  const std::string verdict = policy.CheckLiteralHost(host);
  const auto literal = dcm::IpAddress::ParseLiteral(host);
  if (!literal) {
    FUZZ_CHECK(verdict.empty());
    return;
  }
  FUZZ_CHECK(verdict == policy.Check(*literal));
  FUZZ_CHECK(verdict.empty() || IsRefusal(verdict, *literal));
  FUZZ_CHECK(dcm::IpAddress::Parse(literal->ToString()) == literal);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  dcm::OutboundPolicy::Options options;
  if (!input.empty() && input.front() == '!') {
    options.allow_loopback = true;
    input.remove_prefix(1);
  }
  const size_t first = input.find('\n');
  const std::string_view allow = input.substr(0, first);
  std::string_view rest = first == std::string_view::npos ? "" : input.substr(first + 1);
  const size_t second = rest.find('\n');
  const std::string_view deny = rest.substr(0, second);
  const std::string_view host = second == std::string_view::npos ? "" : rest.substr(second + 1);
  options.allow_cidrs = SplitCommas(allow);
  options.deny_cidrs = SplitCommas(deny);

  bool explicit_v6 = false;
  for (const auto* list : {&options.allow_cidrs, &options.deny_cidrs}) {
    for (const std::string& entry : *list) {
      std::string_view text = entry;  // Create trims blanks the same way
      while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
      while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
      auto cidr = dcm::Cidr::Parse(text);
      if (!cidr) {
        FUZZ_CHECK(cidr.error().code == dcm::ErrorCode::kInvalidArgument);
        continue;
      }
      explicit_v6 = explicit_v6 || !cidr->network.is_v4();
      FUZZ_CHECK(cidr->Contains(cidr->network));
      auto again = dcm::Cidr::Parse(cidr->ToString());
      FUZZ_CHECK(again && *again == *cidr);
    }
  }

  const auto defaults = dcm::OutboundPolicy::Create({});
  FUZZ_CHECK(defaults.has_value());
  std::vector<const dcm::OutboundPolicy*> policies = {&*defaults};
  auto created = dcm::OutboundPolicy::Create(options);
  if (created) {
    policies.push_back(&*created);
    FUZZ_CHECK(!created->Describe().empty());
  } else {
    FUZZ_CHECK(created.error().code == dcm::ErrorCode::kInvalidArgument);
    FUZZ_CHECK(created.error().message.starts_with("OUTBOUND_ALLOW_CIDRS: '") ||
               created.error().message.starts_with("OUTBOUND_DENY_CIDRS: '"));
  }

  if (auto strict = dcm::IpAddress::Parse(host)) {
    FUZZ_CHECK(dcm::IpAddress::Parse(strict->ToString()) == strict);
    FUZZ_CHECK(dcm::IpAddress::ParseLiteral(host) == strict);
    for (const auto* policy : policies) {
      const std::string reason = policy->Check(*strict);
      FUZZ_CHECK(reason.empty() || IsRefusal(reason, *strict));
      const auto embedded = strict->EmbeddedV4();
      if (embedded && (policy == &*defaults || !explicit_v6)) {
        FUZZ_CHECK(reason.empty() == policy->Check(*embedded).empty());
      }
    }
  }
  for (const auto* policy : policies) {
    CheckHost(*policy, host);
    if (auto url = dcm::ParseHttpUrl(host)) CheckHost(*policy, url->host);
  }

  const std::string summary = dcm::SummarizeReply(502, allow, host);
  FUZZ_CHECK(summary.size() <= dcm::kMaxReplySummaryBytes);
  FUZZ_CHECK(summary.starts_with("HTTP 502"));
  FUZZ_CHECK(ValidUtf8WithoutControls(summary));
  const std::string sanitized = dcm::SanitizeText(host, 40);
  FUZZ_CHECK(sanitized.size() <= 40 && ValidUtf8WithoutControls(sanitized));
  return 0;
}
