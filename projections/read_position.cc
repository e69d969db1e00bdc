#include "projections/read_position.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "src/common/base64url.h"

namespace dcm {
namespace {

constexpr uint8_t kVersion = 1;
void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads a varint of at most `max` from `in` at `*at`; false if truncated, overlong or too big.
bool GetVarint(std::string_view in, size_t* at, uint64_t max, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*at >= in.size()) return false;
    const auto byte = static_cast<uint8_t>(in[(*at)++]);
    if (shift == 63 && byte > 1) return false;
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      // A trailing zero byte would be a second encoding of the same value.
      if (byte == 0 && shift > 0) return false;
      if (v > max) return false;
      *value = v;
      return true;
    }
  }
  return false;
}

Error Malformed(const std::string& why) {
  return Error{ErrorCode::kInvalidArgument,
               "min_position is not a DCM-Position token: " + why,
               {{"min_position", why}}};
}

bool Before(const PositionEntry& a, const PositionEntry& b) {
  return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
}

}  // namespace

void ReadPosition::Raise(uint8_t topic, int32_t partition, int64_t next) {
  const PositionEntry entry{topic, partition, next};
  auto it = std::lower_bound(entries_.begin(), entries_.end(), entry, Before);
  if (it != entries_.end() && it->topic == topic && it->partition == partition) {
    it->next = std::max(it->next, next);
    return;
  }
  entries_.insert(it, entry);
}

void ReadPosition::Merge(const ReadPosition& other) {
  for (const auto& e : other.entries_) Raise(e.topic, e.partition, e.next);
}

std::string EncodePosition(const ReadPosition& position) {
  std::string bytes;
  bytes.reserve(1 + position.entries().size() * 8);
  bytes.push_back(static_cast<char>(kVersion));
  for (const auto& e : position.entries()) {
    bytes.push_back(static_cast<char>(e.topic));
    PutVarint(bytes, static_cast<uint64_t>(e.partition));
    PutVarint(bytes, static_cast<uint64_t>(e.next));
  }
  return Base64UrlEncode(bytes);
}

Result<ReadPosition> DecodePosition(std::string_view token, size_t topic_count) {
  if (token.size() > kMaxPositionTokenBytes) return tl::unexpected(Malformed("too long"));
  auto decoded = Base64UrlDecode(token);
  if (!decoded) return tl::unexpected(Malformed("not base64url"));
  const std::string& bytes = *decoded;
  if (bytes.empty() || static_cast<uint8_t>(bytes[0]) != kVersion) {
    return tl::unexpected(Malformed("unknown version"));
  }
  ReadPosition position;
  std::vector<PositionEntry> entries;
  size_t at = 1;
  while (at < bytes.size()) {
    PositionEntry e;
    e.topic = static_cast<uint8_t>(bytes[at++]);
    if (e.topic >= topic_count) return tl::unexpected(Malformed("unknown topic"));
    uint64_t partition = 0;
    uint64_t next = 0;
    if (!GetVarint(bytes, &at, std::numeric_limits<int32_t>::max(), &partition) ||
        !GetVarint(bytes, &at, std::numeric_limits<int64_t>::max(), &next)) {
      return tl::unexpected(Malformed("bad number"));
    }
    e.partition = static_cast<int32_t>(partition);
    e.next = static_cast<int64_t>(next);
    if (!entries.empty() && !Before(entries.back(), e)) {
      return tl::unexpected(Malformed("entries out of order"));
    }
    entries.push_back(e);
  }
  for (const auto& e : entries) position.Raise(e.topic, e.partition, e.next);
  return position;
}

}  // namespace dcm
