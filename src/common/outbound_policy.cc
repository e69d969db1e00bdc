#include "src/common/outbound_policy.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace dcm {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// glibc's inet_pton4: four decimal parts 0..255, no leading zeros, nothing else.
bool ParseDottedQuad(std::string_view s, uint8_t* out) {
  uint8_t tmp[4] = {};
  int octets = 0;
  bool saw_digit = false;
  for (char ch : s) {
    if (IsDigit(ch)) {
      if (!saw_digit) {
        if (++octets > 4) return false;
        saw_digit = true;
      } else if (tmp[octets - 1] == 0) {
        return false;  // a leading zero
      }
      const unsigned next = tmp[octets - 1] * 10u + static_cast<unsigned>(ch - '0');
      if (next > 255) return false;
      tmp[octets - 1] = static_cast<uint8_t>(next);
    } else if (ch == '.' && saw_digit) {
      if (octets == 4) return false;
      saw_digit = false;
    } else {
      return false;
    }
  }
  if (octets < 4) return false;
  std::copy(tmp, tmp + 4, out);
  return true;
}

// glibc's inet_pton6, ported: hex groups of 1..4 digits, at most one "::", an optional
// trailing dotted quad in place of the last two groups.
bool ParseIpv6(std::string_view s, std::array<uint8_t, 16>* out) {
  std::array<uint8_t, 16> tmp{};
  size_t tp = 0;
  std::optional<size_t> colonp;
  size_t i = 0;
  if (s.empty()) return false;
  if (s[0] == ':') {
    if (s.size() < 2 || s[1] != ':') return false;
    i = 1;
  }
  size_t curtok = i;
  size_t xdigits = 0;
  unsigned val = 0;
  bool saw_quad = false;
  while (i < s.size()) {
    const char ch = s[i++];
    const int digit = HexDigit(ch);
    if (digit >= 0) {
      if (xdigits == 4) return false;
      val = (val << 4) | static_cast<unsigned>(digit);
      ++xdigits;
      continue;
    }
    if (ch == ':') {
      curtok = i;
      if (xdigits == 0) {
        if (colonp) return false;
        colonp = tp;
        continue;
      }
      if (i == s.size()) return false;  // a trailing single ':'
      if (tp + 2 > 16) return false;
      tmp[tp++] = static_cast<uint8_t>(val >> 8);
      tmp[tp++] = static_cast<uint8_t>(val & 0xff);
      xdigits = 0;
      val = 0;
      continue;
    }
    if (ch == '.' && tp + 4 <= 16 && ParseDottedQuad(s.substr(curtok), &tmp[tp])) {
      tp += 4;
      xdigits = 0;
      saw_quad = true;
      break;
    }
    return false;
  }
  if (xdigits > 0 && !saw_quad) {
    if (tp + 2 > 16) return false;
    tmp[tp++] = static_cast<uint8_t>(val >> 8);
    tmp[tp++] = static_cast<uint8_t>(val & 0xff);
  }
  if (colonp) {
    if (tp == 16) return false;  // "::" must stand for at least one group
    const size_t n = tp - *colonp;
    std::copy_backward(tmp.begin() + static_cast<std::ptrdiff_t>(*colonp),
                       tmp.begin() + static_cast<std::ptrdiff_t>(tp), tmp.end());
    std::fill(tmp.begin() + static_cast<std::ptrdiff_t>(*colonp),
              tmp.end() - static_cast<std::ptrdiff_t>(n), 0);
    tp = 16;
  }
  if (tp != 16) return false;
  *out = tmp;
  return true;
}

// glibc's inet_aton as getaddrinfo uses it (__inet_aton_exact: the whole string): 1..4 parts
// separated by '.', each starting with a digit, in C notation (0x hex, leading 0 octal, else
// decimal); the last part fills the remaining bytes (a.b.c: c is 16 bits; a.b: b is 24 bits;
// a: 32 bits).
std::optional<uint32_t> ParseInetAton(std::string_view s) {
  static constexpr uint32_t kMax[4] = {0xffffffffu, 0xffffffu, 0xffffu, 0xffu};
  uint8_t parts[3] = {};
  size_t n_parts = 0;  // completed parts before the last
  size_t i = 0;
  for (;;) {
    if (i >= s.size() || !IsDigit(s[i])) return std::nullopt;
    // strtoul(..., 0): "0x" followed by a hex digit is hex; a leading 0 is octal.
    uint64_t val = 0;
    if (s[i] == '0' && i + 2 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
        HexDigit(s[i + 2]) >= 0) {
      i += 2;
      while (i < s.size() && HexDigit(s[i]) >= 0) {
        val = val * 16 + static_cast<uint64_t>(HexDigit(s[i++]));
        if (val > 0xffffffffu) return std::nullopt;
      }
    } else if (s[i] == '0') {
      while (i < s.size() && s[i] >= '0' && s[i] <= '7') {
        val = val * 8 + static_cast<uint64_t>(s[i++] - '0');
        if (val > 0xffffffffu) return std::nullopt;
      }
    } else {
      while (i < s.size() && IsDigit(s[i])) {
        val = val * 10 + static_cast<uint64_t>(s[i++] - '0');
        if (val > 0xffffffffu) return std::nullopt;
      }
    }
    if (i < s.size() && s[i] == '.') {
      if (n_parts > 2 || val > 0xff) return std::nullopt;
      parts[n_parts++] = static_cast<uint8_t>(val);
      ++i;
      continue;
    }
    if (i != s.size()) return std::nullopt;  // trailing characters
    if (val > kMax[n_parts]) return std::nullopt;
    uint32_t result = static_cast<uint32_t>(val);
    for (size_t p = 0; p < n_parts; ++p) result |= static_cast<uint32_t>(parts[p]) << (24 - 8 * p);
    return result;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Bits of an address, as a prefix length can index them.
bool PrefixEqual(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int bits) {
  const int whole = bits / 8;
  for (int i = 0; i < whole; ++i) {
    if (a[static_cast<size_t>(i)] != b[static_cast<size_t>(i)]) return false;
  }
  const int rest = bits % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[static_cast<size_t>(whole)] & mask) == (b[static_cast<size_t>(whole)] & mask);
}

IpAddress MaskTo(const IpAddress& address, int bits) {
  std::array<uint8_t, 16> bytes = address.bytes();
  const int total = address.is_v4() ? 32 : 128;
  for (int bit = bits; bit < total; ++bit) {
    bytes[static_cast<size_t>(bit / 8)] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  }
  if (address.is_v4()) {
    return IpAddress::V4((uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
                         (uint32_t{bytes[2]} << 8) | bytes[3]);
  }
  return IpAddress::V6(bytes);
}

Cidr MustParse(std::string_view text) { return *Cidr::Parse(text); }

struct DefaultRule {
  const char* cidr;
  const char* label;
};

constexpr DefaultRule kDefaultDeny[] = {
    {"0.0.0.0/8", "unspecified"},
    {"::/128", "unspecified"},
    {"127.0.0.0/8", "loopback"},
    {"::1/128", "loopback"},
    {"169.254.0.0/16", "link-local"},
    {"fe80::/10", "link-local"},
    {"224.0.0.0/4", "multicast"},
    {"ff00::/8", "multicast"},
    {"255.255.255.255/32", "broadcast"},
    {"169.254.169.254/32", "cloud metadata"},
    {"100.100.100.200/32", "cloud metadata (Alibaba)"},
    {"fd00:ec2::254/128", "cloud metadata (AWS IPv6)"},
};

}  // namespace

// ---- IpAddress --------------------------------------------------------------------------------

IpAddress IpAddress::V4(uint32_t value) {
  IpAddress a;
  a.v4_ = true;
  a.bytes_[0] = static_cast<uint8_t>(value >> 24);
  a.bytes_[1] = static_cast<uint8_t>(value >> 16);
  a.bytes_[2] = static_cast<uint8_t>(value >> 8);
  a.bytes_[3] = static_cast<uint8_t>(value);
  return a;
}

IpAddress IpAddress::V6(const std::array<uint8_t, 16>& bytes) {
  IpAddress a;
  a.v4_ = false;
  a.bytes_ = bytes;
  return a;
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  uint8_t quad[4];
  if (ParseDottedQuad(text, quad)) {
    return V4((uint32_t{quad[0]} << 24) | (uint32_t{quad[1]} << 16) | (uint32_t{quad[2]} << 8) |
              quad[3]);
  }
  std::array<uint8_t, 16> bytes;
  if (ParseIpv6(text, &bytes)) return V6(bytes);
  return std::nullopt;
}

std::optional<IpAddress> IpAddress::ParseLiteral(std::string_view text) {
  if (auto strict = Parse(text)) return strict;
  if (auto aton = ParseInetAton(text)) return V4(*aton);
  // getaddrinfo reads "addr%zone" as an IPv6 literal with a scope; the zone does not change
  // which address it is.
  if (const auto percent = text.find('%'); percent != std::string_view::npos) {
    std::array<uint8_t, 16> bytes;
    if (ParseIpv6(text.substr(0, percent), &bytes)) return V6(bytes);
  }
  return std::nullopt;
}

std::optional<IpAddress> IpAddress::EmbeddedV4() const {
  if (v4_) return std::nullopt;
  const auto zero = [this](size_t from, size_t to) {
    return std::all_of(bytes_.begin() + static_cast<std::ptrdiff_t>(from),
                       bytes_.begin() + static_cast<std::ptrdiff_t>(to),
                       [](uint8_t b) { return b == 0; });
  };
  const bool mapped = zero(0, 10) && bytes_[10] == 0xff && bytes_[11] == 0xff;
  const bool nat64 = bytes_[0] == 0x00 && bytes_[1] == 0x64 && bytes_[2] == 0xff &&
                     bytes_[3] == 0x9b && zero(4, 12);
  const bool compatible = zero(0, 12) && !(zero(12, 15) && bytes_[15] <= 1);  // not :: or ::1
  if (!mapped && !nat64 && !compatible) return std::nullopt;
  return V4((uint32_t{bytes_[12]} << 24) | (uint32_t{bytes_[13]} << 16) |
            (uint32_t{bytes_[14]} << 8) | bytes_[15]);
}

std::string IpAddress::ToString() const {
  char buf[64];
  if (v4_) {
    std::snprintf(buf, sizeof(buf), "%u.%u.%u.%u", bytes_[0], bytes_[1], bytes_[2], bytes_[3]);
    return buf;
  }
  const bool mapped =
      std::all_of(bytes_.begin(), bytes_.begin() + 10, [](uint8_t b) { return b == 0; }) &&
      bytes_[10] == 0xff && bytes_[11] == 0xff;
  if (mapped) {
    std::snprintf(buf, sizeof(buf), "::ffff:%u.%u.%u.%u", bytes_[12], bytes_[13], bytes_[14],
                  bytes_[15]);
    return buf;
  }
  uint16_t groups[8];
  for (size_t i = 0; i < 8; ++i) {
    groups[i] = static_cast<uint16_t>((bytes_[2 * i] << 8) | bytes_[2 * i + 1]);
  }
  // The longest run of two or more zero groups (the first one on a tie) becomes "::".
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (groups[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && groups[j] == 0) ++j;
    if (j - i > best_len && j - i >= 2) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof(buf), "%x", groups[i]);
    out += buf;
  }
  return out;
}

// ---- Cidr -------------------------------------------------------------------------------------

Result<Cidr> Cidr::Parse(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + std::string(text) + "' " + why);
  };
  const auto slash = text.find('/');
  const std::string_view address_text = text.substr(0, slash);
  auto address = IpAddress::Parse(address_text);
  if (!address) return bad("is not an IP address or CIDR (a.b.c.d/n or ipv6/n)");
  const int max = address->is_v4() ? 32 : 128;
  int length = max;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    const bool all_digits =
        !digits.empty() && digits.size() <= 3 && std::all_of(digits.begin(), digits.end(), IsDigit);
    if (!all_digits) return bad("has an invalid prefix length");
    std::from_chars(digits.data(), digits.data() + digits.size(), length);
    if (length > max) return bad("has a prefix length over " + std::to_string(max));
  }
  const IpAddress network = MaskTo(*address, length);
  if (network != *address) {
    return bad("has host bits set (the network is " + network.ToString() + "/" +
               std::to_string(length) + ")");
  }
  return Cidr{network, length};
}

bool Cidr::Contains(const IpAddress& address) const {
  return address.is_v4() == network.is_v4() &&
         PrefixEqual(address.bytes(), network.bytes(), prefix_length);
}

std::string Cidr::ToString() const {
  return network.ToString() + "/" + std::to_string(prefix_length);
}

// ---- OutboundPolicy -----------------------------------------------------------------------

Result<OutboundPolicy> OutboundPolicy::Create(const Options& options) {
  OutboundPolicy policy;
  for (const auto& rule : kDefaultDeny) {
    policy.rules_.push_back(Rule{MustParse(rule.cidr), false, false, rule.label});
  }
  if (options.allow_loopback) {
    for (const char* cidr : {"127.0.0.0/8", "::1/128"}) {
      policy.rules_.push_back(Rule{MustParse(cidr), true, true, "loopback, dev mode"});
    }
  }
  const std::pair<const std::vector<std::string>*, bool> lists[] = {{&options.allow_cidrs, true},
                                                                    {&options.deny_cidrs, false}};
  for (const auto& [list, allow] : lists) {
    const char* name = allow ? "OUTBOUND_ALLOW_CIDRS" : "OUTBOUND_DENY_CIDRS";
    for (const std::string& entry : *list) {
      const std::string_view text = Trim(entry);
      if (text.empty()) continue;
      auto cidr = Cidr::Parse(text);
      if (!cidr) {
        return MakeError(ErrorCode::kInvalidArgument,
                         std::string(name) + ": " + cidr.error().message);
      }
      policy.rules_.push_back(Rule{*cidr, allow, true, name});
    }
  }
  return policy;
}

OutboundPolicy OutboundPolicy::AllowAll() { return OutboundPolicy(); }

const OutboundPolicy::Rule* OutboundPolicy::Decide(const IpAddress& address,
                                                   bool* via_embedded) const {
  const std::optional<IpAddress> embedded = address.EmbeddedV4();
  const Rule* best = nullptr;
  int best_length = -1;
  for (const Rule& rule : rules_) {
    bool embedded_match = false;
    if (rule.cidr.Contains(address)) {
      embedded_match = false;
    } else if (embedded && rule.cidr.Contains(*embedded)) {
      embedded_match = true;
    } else {
      continue;
    }
    // IPv4 lengths count in the IPv6 space (::ffff:0:0/96 + n), so a mapped address compares
    // its IPv6 and IPv4 matches on one scale.
    const int length = rule.cidr.prefix_length + (rule.cidr.network.is_v4() ? 96 : 0);
    bool better = length > best_length;
    if (length == best_length) {
      if (rule.is_explicit != best->is_explicit) {
        better = rule.is_explicit;
      } else {
        better = !rule.allow && best->allow;
      }
    }
    if (better) {
      best = &rule;
      best_length = length;
      *via_embedded = embedded_match;
    }
  }
  return best;
}

std::string OutboundPolicy::Check(const IpAddress& address) const {
  bool via_embedded = false;
  const Rule* rule = Decide(address, &via_embedded);
  if (rule == nullptr || rule->allow) return "";
  std::string out = address.ToString();
  if (via_embedded) out += " embeds " + address.EmbeddedV4()->ToString() + ", which";
  out +=
      " is in " + rule->cidr.ToString() + " (" + rule->label + "), refused by the outbound policy";
  return out;
}

std::string OutboundPolicy::CheckLiteralHost(std::string_view host) const {
  auto address = IpAddress::ParseLiteral(host);
  if (!address) return "";
  return Check(*address);
}

std::string OutboundPolicy::Describe() const {
  if (rules_.empty()) return "allows every address (no outbound filtering)";
  std::string refuses, allows;
  for (const Rule& rule : rules_) {
    std::string& list = rule.allow ? allows : refuses;
    list += (list.empty() ? "" : ", ") + rule.cidr.ToString() + " (" + rule.label + ")";
  }
  std::string out = "refuses " + refuses;
  if (!allows.empty()) out += "; allows " + allows;
  out +=
      "; the longest matching prefix decides (explicit over default, deny over allow), "
      "anything else is allowed";
  return out;
}

}  // namespace dcm
