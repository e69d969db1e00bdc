// OutboundPolicy: which addresses the control plane may connect to when the address came from a
// registration (SPEC §6 "Outbound policy"): health probes and SP instance calls. The one dialer
// (src/http/dialer.h) resolves a name, judges EVERY resolved address here, and connects only to
// the addresses it judged; registration validation judges literal endpoints up front
// (CheckLiteralHost). Operator-configured endpoints (Policy Manager, OIDC issuer, Kafka) are not
// filtered: their clients get no policy.
//
// Rules are CIDRs, each allow or deny, each default or explicit:
//   default deny  0.0.0.0/8 ::/128 (unspecified), 127.0.0.0/8 ::1/128 (loopback),
//                 169.254.0.0/16 fe80::/10 (link-local), 224.0.0.0/4 ff00::/8 (multicast),
//                 255.255.255.255/32 (broadcast), and the cloud metadata addresses
//                 169.254.169.254/32, 100.100.100.200/32 (Alibaba), fd00:ec2::254/128 (AWS
//                 IPv6) as their own /32 and /128: allowing 169.254.0.0/16 leaves them refused.
//   explicit      allow_cidrs (OUTBOUND_ALLOW_CIDRS), deny_cidrs (OUTBOUND_DENY_CIDRS), and
//                 allow_loopback (`--dev`) = allow 127.0.0.0/8 and ::1/128.
// Decision: the longest matching prefix wins; on equal length an explicit rule beats a default
// one, and deny beats allow. No match: allowed.
//
// IPv6 spellings of IPv4 addresses are also judged as the IPv4 address they embed, so no range
// can be bypassed by spelling it differently: IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96 and
// IPv4-compatible ::/96 (except :: and ::1, which are themselves). Such an address is matched
// against the IPv6 rules as itself and against the IPv4 rules as its embedded address, with an
// IPv4 /n counted as /(96+n) when lengths are compared. So `::ffff:127.0.0.1` is refused as
// 127.0.0.1 is, and OUTBOUND_ALLOW_CIDRS=127.0.0.0/8 lets both through. IPv4 rules never match a
// plain IPv6 address and IPv6 rules never match an IPv4 one (deny ::/0 means "no IPv6").
//
// CIDR syntax (Create): "a.b.c.d/n" (strict dotted quad), "ipv6/n", or a bare address (= /32 or
// /128); blanks around an entry are trimmed and empty entries skipped. A CIDR with host bits
// set ("10.0.0.1/8") is refused rather than silently widened: it is usually a typo for a
// narrower range, and widening a deny or allow list by accident is exactly what must not happen.
//
// Thread-safety: immutable after Create; share it (std::shared_ptr<const OutboundPolicy>).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace dcm {

// An IPv4 or IPv6 address (no zone/scope id). Value type, ordered, printable.
class IpAddress {
 public:
  IpAddress() = default;  // 0.0.0.0
  // `value` in host order: V4(0x7f000001) is 127.0.0.1.
  static IpAddress V4(uint32_t value);
  static IpAddress V6(const std::array<uint8_t, 16>& bytes);

  // Strict text forms, exactly what inet_pton accepts: a dotted quad of four decimal parts
  // 0..255 without leading zeros, or RFC 4291 IPv6 text (hex groups, at most one "::", an
  // optional trailing dotted quad). No brackets, no zone id, no blanks.
  static std::optional<IpAddress> Parse(std::string_view text);
  // Every spelling the system resolver (glibc getaddrinfo) takes as a literal rather than a
  // name: Parse, plus inet_aton's IPv4 forms ("127.1", "2130706433", "0x7f000001",
  // "0177.0.0.1", parts in decimal, octal or hex, the last one filling the remaining bytes),
  // plus an IPv6 literal with a zone id ("fe80::1%eth0", the zone dropped).
  static std::optional<IpAddress> ParseLiteral(std::string_view text);

  bool is_v4() const { return v4_; }
  // Network order; 4 bytes used for IPv4 (the rest zero), 16 for IPv6.
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }
  // The IPv4 address embedded in an IPv4-mapped, NAT64 or IPv4-compatible IPv6 address (see
  // the header comment); nullopt for IPv4 addresses and other IPv6 addresses.
  std::optional<IpAddress> EmbeddedV4() const;

  // Dotted quad; IPv6 per RFC 5952 (lower case, the longest run of two or more zero groups
  // compressed), IPv4-mapped addresses as ::ffff:a.b.c.d. Parse(ToString()) gives it back.
  std::string ToString() const;

  auto operator<=>(const IpAddress&) const = default;

 private:
  bool v4_ = true;
  std::array<uint8_t, 16> bytes_{};
};

// A network: an address and a prefix length, host bits zero.
struct Cidr {
  IpAddress network;
  int prefix_length = 0;

  // "a.b.c.d/n", "ipv6/n" or a bare address (a /32 or /128). kInvalidArgument with the reason
  // for anything else, including host bits set (naming the network that was probably meant).
  static Result<Cidr> Parse(std::string_view text);
  bool Contains(const IpAddress& address) const;
  std::string ToString() const;  // "10.0.0.0/8"
  bool operator==(const Cidr&) const = default;
};

class OutboundPolicy {
 public:
  struct Options {
    // Dev mode (`dcm serve --dev`): an explicit allow of 127.0.0.0/8 and ::1/128.
    bool allow_loopback = false;
    // OUTBOUND_ALLOW_CIDRS / OUTBOUND_DENY_CIDRS, one CIDR per entry (see the header comment).
    std::vector<std::string> allow_cidrs;
    std::vector<std::string> deny_cidrs;
  };

  // The default rules plus `options`. kInvalidArgument naming the variable and the bad entry:
  // "OUTBOUND_DENY_CIDRS: '10.0.0.1/8' has host bits set (the network is 10.0.0.0/8)".
  static Result<OutboundPolicy> Create(const Options& options);
  // No rules at all: every address is allowed (tests; operator-configured endpoints).
  static OutboundPolicy AllowAll();

  // "" when `address` may be connected to, else why not:
  // "127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy"
  // "::ffff:10.1.2.3 embeds 10.1.2.3, which is in 10.0.0.0/8 (OUTBOUND_DENY_CIDRS), refused
  //  by the outbound policy".
  std::string Check(const IpAddress& address) const;

  // For registration validation, with Url::host (brackets already stripped): when `host` is an
  // IP literal in any spelling the resolver accepts (IpAddress::ParseLiteral), Check of that
  // address; "" for a name (names are judged when connecting, after resolution).
  std::string CheckLiteralHost(std::string_view host) const;

  // One line for logs and /admin/info: "refuses 0.0.0.0/8 (unspecified), ...; allows
  // 127.0.0.0/8 (loopback, dev mode), ...; the longest matching prefix decides, anything else
  // is allowed", or "allows every address (no outbound filtering)".
  std::string Describe() const;

 private:
  struct Rule {
    Cidr cidr;
    bool allow = false;
    bool is_explicit = false;
    std::string label;  // "loopback", "OUTBOUND_ALLOW_CIDRS", ...
  };
  OutboundPolicy() = default;
  // The deciding rule for `address`, or nullptr (no rule matches); `*via_embedded` says whether
  // it matched the embedded IPv4 address rather than the address itself.
  const Rule* Decide(const IpAddress& address, bool* via_embedded) const;

  std::vector<Rule> rules_;
};

}  // namespace dcm
