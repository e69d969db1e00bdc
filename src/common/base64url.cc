#include "src/common/base64url.h"

#include <array>
#include <cstdint>

namespace dcm {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// Sextet of each byte, or -1 for bytes outside the alphabet.
constexpr std::array<int8_t, 256> MakeReverse() {
  std::array<int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (int i = 0; i < 64; ++i)
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kReverse = MakeReverse();

}  // namespace

std::optional<std::string> Base64UrlDecode(std::string_view text, Padding padding) {
  if (padding == Padding::kAllow) {
    const size_t pad_start = text.find_last_not_of('=') + 1;  // npos + 1 == 0: all '='
    if (text.size() - pad_start > 2 || (pad_start != text.size() && text.size() % 4 != 0)) {
      return std::nullopt;
    }
    text = text.substr(0, pad_start);
  }
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : text) {
    const int8_t sextet = kReverse[c];
    if (sextet < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(sextet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  // The leftover bits (2 or 4) must be zero: a canonical encoding.
  if ((buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(buffer >> bits) & 0x3F]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (6 - bits)) & 0x3F]);
  return out;
}

}  // namespace dcm
