#include "src/common/uuid.h"

#include <openssl/sha.h>

#include <cstdint>
#include <random>

namespace dcm {
namespace {

std::string Format(uint64_t hi, uint64_t lo) {
  hi = (hi & ~0xF000ULL) | 0x4000ULL;                         // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(36, '-');
  int pos = 0;
  auto put = [&](uint64_t v, int nibbles) {
    for (int i = nibbles - 1; i >= 0; --i) {
      if (pos == 8 || pos == 13 || pos == 18 || pos == 23) ++pos;
      out[pos++] = kHex[(v >> (i * 4)) & 0xF];
    }
  };
  put(hi, 16);
  put(lo, 16);
  return out;
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string NewUuidV4() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  const uint64_t hi = rng();
  const uint64_t lo = rng();
  return Format(hi, lo);
}

std::string DeterministicUuid(std::string_view seed) {
  uint64_t a = 0x243F6A8885A308D3ULL, b = 0x13198A2E03707344ULL;
  for (unsigned char c : seed) {
    a = SplitMix(a ^ c);
    b = SplitMix(b + c + (a >> 7));
  }
  return Format(SplitMix(a ^ seed.size()), SplitMix(b ^ a));
}

std::string UuidV5(std::string_view namespace_uuid, std::string_view name) {
  auto nibble = [](char c) -> unsigned {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 0;
  };
  std::string input;
  input.reserve(16 + name.size());
  for (size_t i = 0; i + 1 < namespace_uuid.size();) {
    if (namespace_uuid[i] == '-') {
      ++i;
      continue;
    }
    input.push_back(
        static_cast<char>(nibble(namespace_uuid[i]) << 4 | nibble(namespace_uuid[i + 1])));
    i += 2;
  }
  input.append(name);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  digest[6] = static_cast<unsigned char>((digest[6] & 0x0F) | 0x50);  // version 5
  digest[8] = static_cast<unsigned char>((digest[8] & 0x3F) | 0x80);  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

bool IsUuid(std::string_view t) {
  if (t.size() != 36) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

}  // namespace dcm
