// OutboundPolicy (SPEC §6 "Outbound policy"): IP parsing and printing, CIDRs, every default
// range, IPv6 spellings of IPv4 addresses, the resolver's literal forms, and rule precedence.
#include "src/common/outbound_policy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "src/common/url.h"

namespace dcm {
namespace {

IpAddress Ip(const std::string& text) {
  auto ip = IpAddress::Parse(text);
  EXPECT_TRUE(ip) << text;
  return ip.value_or(IpAddress());
}

OutboundPolicy::Options Options(std::vector<std::string> allow, std::vector<std::string> deny = {},
                                bool allow_loopback = false) {
  OutboundPolicy::Options options;
  options.allow_cidrs = std::move(allow);
  options.deny_cidrs = std::move(deny);
  options.allow_loopback = allow_loopback;
  return options;
}

OutboundPolicy Policy(OutboundPolicy::Options options = {}) {
  auto policy = OutboundPolicy::Create(options);
  EXPECT_TRUE(policy) << policy.error().message;
  return policy ? std::move(*policy) : OutboundPolicy::AllowAll();
}

bool Refused(const OutboundPolicy& policy, const std::string& address) {
  return !policy.Check(Ip(address)).empty();
}

// ---- IpAddress ------------------------------------------------------------------------------

TEST(IpAddressTest, ParsesAndPrintsCanonicalForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1", "127.0.0.1"},
      {"0.0.0.0", "0.0.0.0"},
      {"255.255.255.255", "255.255.255.255"},
      {"::", "::"},
      {"::1", "::1"},
      {"2001:DB8:0:0:0:0:0:1", "2001:db8::1"},
      {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},  // the first of two equal runs
      {"2001:0db8:0000:0001:0000:0000:0000:0001", "2001:db8:0:1::1"},
      {"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},  // one zero group stays
      {"fe80::", "fe80::"},
      {"1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"},
      {"::ffff:127.0.0.1", "::ffff:127.0.0.1"},
      {"::ffff:7f00:1", "::ffff:127.0.0.1"},
      {"64:ff9b::192.0.2.33", "64:ff9b::c000:221"},
      {"::127.0.0.1", "::7f00:1"},
  };
  for (const auto& [text, printed] : cases) {
    auto ip = IpAddress::Parse(text);
    ASSERT_TRUE(ip) << text;
    EXPECT_EQ(ip->ToString(), printed) << text;
    EXPECT_EQ(IpAddress::Parse(ip->ToString()), ip) << text;
  }
  EXPECT_TRUE(Ip("10.1.2.3").is_v4());
  EXPECT_FALSE(Ip("::ffff:10.1.2.3").is_v4());
  EXPECT_EQ(IpAddress::V4(0x7f000001), Ip("127.0.0.1"));
}

TEST(IpAddressTest, StrictParseRefusesWhatInetPtonRefuses) {
  for (const char* text :
       {"",         "1.2.3",    "1.2.3.4.5",    "256.0.0.1",         "01.2.3.4",
        "1.2.3.04", "127.1",    "0x7f000001",   "2130706433",        " 1.2.3.4",
        "1.2.3.4 ", "1.2.3.4.", "[::1]",        "::1%eth0",          ":::",
        "1:::2",    ":1::",     "1::2:",        "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8::",
        "12345::",  "g::",      "::ffff:1.2.3", "::1.2.3.4:5",       "localhost",
        "1..2.3"}) {
    EXPECT_FALSE(IpAddress::Parse(text)) << text;
  }
}

TEST(IpAddressTest, StrictParseAgreesWithInetPton) {
  for (const char* text : {"1.2.3.4", "01.2.3.4", "127.1", "::", "::1", "1::", "1:2:3:4:5:6:7::",
                           "::1.2.3.4", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1::1.2.3.4",
                           "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3.04", "fe80::1%1", "1:2", "a:b::c:d"}) {
    in_addr v4;
    in6_addr v6;
    const bool system = inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1;
    EXPECT_EQ(IpAddress::Parse(text).has_value(), system) << text;
  }
}

TEST(IpAddressTest, ParseLiteralAcceptsEveryInetAtonForm) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.1", "127.0.0.1"},
      {"127.0.1", "127.0.0.1"},
      {"2130706433", "127.0.0.1"},
      {"0x7f000001", "127.0.0.1"},
      {"0X7F000001", "127.0.0.1"},
      {"0177.0.0.1", "127.0.0.1"},
      {"0x7f.1", "127.0.0.1"},
      {"0x7f.0.0.0x1", "127.0.0.1"},
      {"017700000001", "127.0.0.1"},
      {"0", "0.0.0.0"},
      {"169.254.43518", "169.254.169.254"},
      {"0xa9fea9fe", "169.254.169.254"},
      {"10.0.0.010", "10.0.0.8"},  // octal, as the resolver reads it
      {"fe80::1%eth0", "fe80::1"},
      {"::ffff:127.0.0.1", "::ffff:127.0.0.1"},
  };
  for (const auto& [text, address] : cases) {
    auto ip = IpAddress::ParseLiteral(text);
    ASSERT_TRUE(ip) << text;
    EXPECT_EQ(ip->ToString(), address) << text;
  }
  for (const char* text : {"08", "0x", "0x.1", "1.2.3.4.5", "256.1", "1.256.1", "1.2.65536",
                           "4294967296", "0x100000000", "1.2.3.4.", "127.0.0.1x", "-1", "+1",
                           "1. 2", "localhost", "sp.example", "1e3", ""}) {
    EXPECT_FALSE(IpAddress::ParseLiteral(text)) << text;
  }
}

TEST(IpAddressTest, ParseLiteralAgreesWithTheSystemResolver) {
  // getaddrinfo with AI_NUMERICHOST takes exactly the literals a name lookup would not send to
  // DNS; each must parse to the same address here.
  for (const char* text : {"127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.1", "1.2.3",
                           "08", "0x", "1.2.3.4.", "4294967296", "0xffffffff", "00", "0.0x10",
                           "::ffff:1.2.3.4", "1::", "a.b", "127.0.0.1x", "1.2.3.4.5"}) {
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    const bool system = getaddrinfo(text, nullptr, &hints, &result) == 0;
    auto ours = IpAddress::ParseLiteral(text);
    EXPECT_EQ(ours.has_value(), system) << text;
    if (system && ours) {
      char buf[INET6_ADDRSTRLEN] = {};
      const sockaddr* sa = result->ai_addr;
      if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
      } else {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf,
                  sizeof(buf));
      }
      EXPECT_EQ(ours, IpAddress::Parse(buf)) << text << " vs " << buf;
    }
    if (result != nullptr) freeaddrinfo(result);
  }
}

TEST(IpAddressTest, EmbeddedV4OfMappedNat64AndCompatibleAddresses) {
  EXPECT_EQ(Ip("::ffff:10.1.2.3").EmbeddedV4(), Ip("10.1.2.3"));
  EXPECT_EQ(Ip("64:ff9b::10.1.2.3").EmbeddedV4(), Ip("10.1.2.3"));
  EXPECT_EQ(Ip("::10.1.2.3").EmbeddedV4(), Ip("10.1.2.3"));
  EXPECT_FALSE(Ip("::").EmbeddedV4());
  EXPECT_FALSE(Ip("::1").EmbeddedV4());
  EXPECT_FALSE(Ip("10.1.2.3").EmbeddedV4());
  EXPECT_FALSE(Ip("2001:db8::a01:203").EmbeddedV4());
  EXPECT_FALSE(Ip("64:ff9b:1::a01:203").EmbeddedV4());
}

// ---- Cidr -------------------------------------------------------------------------------------

TEST(CidrTest, ParsesNetworksAndBareAddresses) {
  auto cidr = Cidr::Parse("10.0.0.0/8");
  ASSERT_TRUE(cidr);
  EXPECT_EQ(cidr->ToString(), "10.0.0.0/8");
  EXPECT_TRUE(cidr->Contains(Ip("10.255.0.1")));
  EXPECT_FALSE(cidr->Contains(Ip("11.0.0.0")));
  EXPECT_FALSE(cidr->Contains(Ip("::ffff:10.0.0.1")));  // families never mix at this level
  EXPECT_EQ(Cidr::Parse("192.0.2.7")->ToString(), "192.0.2.7/32");
  EXPECT_EQ(Cidr::Parse("2001:db8::1")->ToString(), "2001:db8::1/128");
  EXPECT_EQ(Cidr::Parse("fe80::/10")->ToString(), "fe80::/10");
  EXPECT_TRUE(Cidr::Parse("fe80::/10")->Contains(Ip("febf::1")));
  EXPECT_FALSE(Cidr::Parse("fe80::/10")->Contains(Ip("fec0::1")));
  EXPECT_TRUE(Cidr::Parse("0.0.0.0/0")->Contains(Ip("1.2.3.4")));
  EXPECT_TRUE(Cidr::Parse("::/0")->Contains(Ip("2001:db8::1")));
}

TEST(CidrTest, RefusesMalformedCidrsAndHostBitsWithTheReason) {
  for (const char* text :
       {"", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/8/8", "10.0.0.0/ 8",
        "10/8", "10.0.0.0/0x8", "10.0.0.0/1000", "[::1]/128", "example.com/24", "127.1/8"}) {
    auto cidr = Cidr::Parse(text);
    ASSERT_FALSE(cidr) << text;
    EXPECT_EQ(cidr.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(cidr.error().message.find(std::string("'") + text + "'"), std::string::npos)
        << cidr.error().message;
  }
  auto host_bits = Cidr::Parse("10.0.0.1/8");
  ASSERT_FALSE(host_bits);
  EXPECT_NE(host_bits.error().message.find("host bits set (the network is 10.0.0.0/8)"),
            std::string::npos)
      << host_bits.error().message;
  auto v6_host_bits = Cidr::Parse("fe80::1/10");
  ASSERT_FALSE(v6_host_bits);
  EXPECT_NE(v6_host_bits.error().message.find("fe80::/10"), std::string::npos);
}

// ---- the default policy -----------------------------------------------------------------------

TEST(OutboundPolicyTest, DefaultRefusesEveryDefaultRangeAtItsEdges) {
  const OutboundPolicy policy = Policy();
  for (const char* address :
       {"127.0.0.1", "127.255.255.255", "127.0.0.0", "::1", "169.254.0.0", "169.254.255.255",
        "169.254.169.254", "fe80::1", "febf:ffff::1", "0.0.0.0", "0.255.255.255", "::", "224.0.0.1",
        "239.255.255.255", "ff02::1", "ff00::", "255.255.255.255", "100.100.100.200",
        "fd00:ec2::254"}) {
    EXPECT_TRUE(Refused(policy, address)) << address;
  }
  for (const char* address :
       {"128.0.0.1", "126.255.255.255", "169.253.255.255", "169.255.0.0", "1.0.0.0", "100::1",
        "fec0::1", "223.255.255.255", "240.0.0.1", "255.255.255.254", "100.100.100.201",
        "fd00:ec2::253", "10.0.0.1", "192.168.1.1", "172.16.0.1", "8.8.8.8", "2001:db8::1"}) {
    EXPECT_FALSE(Refused(policy, address)) << address;
  }
}

TEST(OutboundPolicyTest, ReasonNamesTheAddressTheRangeAndWhy) {
  const OutboundPolicy policy = Policy();
  EXPECT_EQ(policy.Check(Ip("127.0.0.1")),
            "127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy");
  EXPECT_EQ(policy.Check(Ip("169.254.169.254")),
            "169.254.169.254 is in 169.254.169.254/32 (cloud metadata), refused by the outbound "
            "policy");
  EXPECT_EQ(policy.Check(Ip("fd00:ec2::254")),
            "fd00:ec2::254 is in fd00:ec2::254/128 (cloud metadata (AWS IPv6)), refused by the "
            "outbound policy");
  EXPECT_EQ(policy.Check(Ip("::ffff:127.0.0.1")),
            "::ffff:127.0.0.1 embeds 127.0.0.1, which is in 127.0.0.0/8 (loopback), refused by "
            "the outbound policy");
  EXPECT_EQ(policy.Check(Ip("8.8.8.8")), "");
}

TEST(OutboundPolicyTest, Ipv6SpellingsOfIpv4AreJudgedAsTheirIpv4) {
  const OutboundPolicy policy = Policy();
  for (const char* address :
       {"::ffff:127.0.0.1", "::ffff:7f00:1", "64:ff9b::127.0.0.1", "64:ff9b::7f00:1", "::127.0.0.1",
        "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "::ffff:0.0.0.0", "::ffff:224.0.0.1",
        "::ffff:255.255.255.255", "::ffff:100.100.100.200"}) {
    EXPECT_TRUE(Refused(policy, address)) << address;
  }
  EXPECT_FALSE(Refused(policy, "::ffff:8.8.8.8"));
  EXPECT_FALSE(Refused(policy, "64:ff9b::808:808"));

  auto deny = Policy(Options({}, {"10.0.0.0/8"}));
  EXPECT_TRUE(Refused(deny, "::ffff:10.1.2.3"));
  EXPECT_TRUE(Refused(deny, "64:ff9b::10.1.2.3"));
  EXPECT_FALSE(Refused(deny, "::ffff:11.1.2.3"));
}

TEST(OutboundPolicyTest, AllowAllAllowsEverything) {
  const OutboundPolicy policy = OutboundPolicy::AllowAll();
  for (const char* address : {"127.0.0.1", "::1", "169.254.169.254", "0.0.0.0", "ff02::1"}) {
    EXPECT_FALSE(Refused(policy, address)) << address;
  }
  EXPECT_EQ(policy.Describe(), "allows every address (no outbound filtering)");
}

// ---- precedence -----------------------------------------------------------------------------

TEST(OutboundPolicyTest, AllowLoopbackIsAnExplicitAllowOfLoopbackOnly) {
  const OutboundPolicy policy = Policy(Options({}, {}, true));
  for (const char* address : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_FALSE(Refused(policy, address)) << address;
  }
  for (const char* address : {"0.0.0.0", "::", "169.254.169.254", "fe80::1", "224.0.0.1"}) {
    EXPECT_TRUE(Refused(policy, address)) << address;
  }
}

TEST(OutboundPolicyTest, AllowCidrOverridesADefaultOfTheSameLength) {
  // The e2e tests run SPs on loopback with OUTBOUND_ALLOW_CIDRS=127.0.0.0/8.
  const OutboundPolicy policy = Policy(Options({"127.0.0.0/8"}));
  EXPECT_FALSE(Refused(policy, "127.0.0.1"));
  EXPECT_FALSE(Refused(policy, "::ffff:127.0.0.1"));
  EXPECT_TRUE(Refused(policy, "::1"));  // IPv4 rules never match IPv6 addresses
}

TEST(OutboundPolicyTest, LongestPrefixWins) {
  // A wider allow does not open a narrower default deny: metadata stays refused.
  const OutboundPolicy link_local = Policy(Options({"169.254.0.0/16"}));
  EXPECT_FALSE(Refused(link_local, "169.254.1.1"));
  EXPECT_TRUE(Refused(link_local, "169.254.169.254"));
  // A narrower allow inside a default deny opens just that.
  const OutboundPolicy one = Policy(Options({"127.0.0.5/32"}));
  EXPECT_FALSE(Refused(one, "127.0.0.5"));
  EXPECT_TRUE(Refused(one, "127.0.0.6"));
  // Explicit rules nest both ways.
  const OutboundPolicy nested = Policy(Options({"10.1.2.0/24"}, {"10.0.0.0/8", "10.1.2.128/25"}));
  EXPECT_TRUE(Refused(nested, "10.9.9.9"));
  EXPECT_FALSE(Refused(nested, "10.1.2.3"));
  EXPECT_TRUE(Refused(nested, "10.1.2.200"));
  // An IPv4 /n competes with IPv6 rules as /(96+n) for mapped addresses.
  const OutboundPolicy mapped = Policy(Options({"10.0.0.0/8"}, {"::ffff:10.1.0.0/112"}));
  EXPECT_TRUE(Refused(mapped, "::ffff:10.1.2.3"));
  EXPECT_FALSE(Refused(mapped, "::ffff:10.2.2.3"));
  EXPECT_FALSE(Refused(mapped, "10.1.2.3"));
}

TEST(OutboundPolicyTest, OnEqualLengthExplicitBeatsDefaultAndDenyBeatsAllow) {
  const OutboundPolicy both = Policy(Options({"10.0.0.0/8"}, {"10.0.0.0/8"}));
  EXPECT_TRUE(Refused(both, "10.1.1.1"));
  EXPECT_NE(both.Check(Ip("10.1.1.1")).find("(OUTBOUND_DENY_CIDRS)"), std::string::npos);
  const OutboundPolicy loopback_twice = Policy(Options({}, {"127.0.0.0/8"}, true));
  EXPECT_TRUE(Refused(loopback_twice, "127.0.0.1"));  // the explicit deny wins
  EXPECT_FALSE(Refused(loopback_twice, "::1"));
  const OutboundPolicy metadata = Policy(Options({"169.254.169.254/32"}));
  EXPECT_FALSE(Refused(metadata, "169.254.169.254"));  // explicit beats default
}

TEST(OutboundPolicyTest, DenyCidrsRefuseOtherwiseAllowedAddresses) {
  const OutboundPolicy policy = Policy(Options({}, {" 10.0.0.0/8 ", "", "2001:db8::/32"}));
  EXPECT_EQ(policy.Check(Ip("10.2.3.4")),
            "10.2.3.4 is in 10.0.0.0/8 (OUTBOUND_DENY_CIDRS), refused by the outbound policy");
  EXPECT_TRUE(Refused(policy, "2001:db8::1"));
  EXPECT_FALSE(Refused(policy, "2001:db9::1"));
  EXPECT_FALSE(Refused(policy, "11.0.0.1"));
  const OutboundPolicy no_v6 = Policy(Options({}, {"::/0"}));
  EXPECT_TRUE(Refused(no_v6, "2606:4700::1"));
  EXPECT_FALSE(Refused(no_v6, "8.8.8.8"));
}

TEST(OutboundPolicyTest, CreateNamesTheVariableAndTheBadEntry) {
  auto allow = OutboundPolicy::Create(Options({"10.0.0.0/8", "nonsense"}));
  ASSERT_FALSE(allow);
  EXPECT_EQ(allow.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(allow.error().message.rfind("OUTBOUND_ALLOW_CIDRS: 'nonsense' ", 0), 0u)
      << allow.error().message;
  auto deny = OutboundPolicy::Create(Options({}, {"10.0.0.1/8"}));
  ASSERT_FALSE(deny);
  EXPECT_EQ(deny.error().message,
            "OUTBOUND_DENY_CIDRS: '10.0.0.1/8' has host bits set (the network is 10.0.0.0/8)");
}

TEST(OutboundPolicyTest, DescribeListsTheRules) {
  const std::string text = Policy(Options({"10.0.0.0/8"}, {"10.1.0.0/16"}, true)).Describe();
  for (const char* part :
       {"refuses 0.0.0.0/8 (unspecified)", "127.0.0.0/8 (loopback)", "fe80::/10 (link-local)",
        "10.1.0.0/16 (OUTBOUND_DENY_CIDRS)", "allows 127.0.0.0/8 (loopback, dev mode)",
        "::1/128 (loopback, dev mode)", "10.0.0.0/8 (OUTBOUND_ALLOW_CIDRS)", "longest"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " in " << text;
  }
}

// ---- registration: literal hosts --------------------------------------------------------------

TEST(OutboundPolicyTest, CheckLiteralHostRefusesEverySpellingOfARefusedAddress) {
  const OutboundPolicy policy = Policy();
  for (const char* host : {"127.0.0.1",       "127.1",      "127.0.1",          "2130706433",
                           "0x7f000001",      "0X7F000001", "0177.0.0.1",       "0x7f.0.0.1",
                           "017700000001",    "::1",        "::ffff:127.0.0.1", "::ffff:7f00:1",
                           "64:ff9b::7f00:1", "0",          "0.0.0.0",          "::",
                           "169.254.43518",   "0xa9fea9fe", "fe80::1%eth0",     "fe80::1%25eth0",
                           "0:0:0:0:0:0:0:1", "0000::0001"}) {
    EXPECT_NE(policy.CheckLiteralHost(host), "") << host;
  }
  EXPECT_EQ(policy.CheckLiteralHost("0x7f000001"),
            "127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy");
  for (const char* host : {"localhost", "sp.example", "8.8.8.8", "134744072", "2001:db8::1",
                           "metadata.google.internal", "127.0.0.1.nip.io", "0x7f000001.example"}) {
    EXPECT_EQ(policy.CheckLiteralHost(host), "") << host;  // names are judged when connecting
  }
  EXPECT_EQ(Policy(Options({"127.0.0.0/8"})).CheckLiteralHost("127.1"), "");
}

TEST(OutboundPolicyTest, CheckLiteralHostJudgesWhatParseHttpUrlExtracts) {
  const OutboundPolicy policy = Policy();
  for (const char* url :
       {"http://127.0.0.1:8080/api", "http://[::1]/", "https://[::ffff:127.0.0.1]",
        "http://2130706433/", "http://0x7F000001:80/x", "http://0177.0.0.1/", "http://127.1/",
        "HTTP://169.254.169.254/latest/meta-data", "http://[fe80::1%25eth0]:8080/",
        "http://[0:0:0:0:0:ffff:7f00:1]/", "http://0/", "http://[64:ff9b::a9fe:a9fe]/"}) {
    auto parsed = ParseHttpUrl(url);
    ASSERT_TRUE(parsed) << url;
    EXPECT_NE(policy.CheckLiteralHost(parsed->host), "") << url << " host " << parsed->host;
  }
}

}  // namespace
}  // namespace dcm
