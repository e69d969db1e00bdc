// ReadPosition: a position in the event log, as the `DCM-Position` header carries it (SPEC §7
// "Consistent reads"): for each (topic, partition) the next offset, i.e. every record below it is
// covered. A write's position covers the records it was acknowledged with (its request and its
// outcome); a read's covers every write the read reflects (read_barrier.h).
//
// Topics are numbered by their index in Topics::EventTopics() (src/common/config.h), so a token
// names no topic and every instance of one control plane reads it alike; new event topics are
// appended to that list, never inserted.
//
// The token (opaque to clients) is base64url, unpadded, of:
//   0x01                                       version
//   { topic (1 byte), partition (varint), next (varint) } ...   strictly increasing (topic,
//                                                                partition): one canonical form
// Varints are unsigned LEB128 (7 bits a byte, low first). Decoding checks all of it: bad base64,
// another version, a topic out of range, a truncated or overlong varint, a value out of range,
// entries out of order or repeated, or a token over kMaxPositionTokenBytes are errors
// (kInvalidArgument: the HTTP layer answers 400).
//
// Thread-safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace dcm {

struct PositionEntry {
  uint8_t topic = 0;  // index in Topics::EventTopics()
  int32_t partition = 0;
  int64_t next = 0;  // offsets below this one are covered

  bool operator==(const PositionEntry&) const = default;
};

// Token text longer than this is refused (a header, not a payload: ~100 partitions fit).
inline constexpr size_t kMaxPositionTokenBytes = 2048;

class ReadPosition {
 public:
  // Covers `topic`/`partition` up to `next` (keeps the larger of the two).
  void Raise(uint8_t topic, int32_t partition, int64_t next);
  // Covers everything `other` covers too.
  void Merge(const ReadPosition& other);

  // Sorted by (topic, partition), one entry each.
  const std::vector<PositionEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  bool operator==(const ReadPosition&) const = default;

 private:
  std::vector<PositionEntry> entries_;
};

std::string EncodePosition(const ReadPosition& position);

// Parses a token; every topic must be below `topic_count`.
Result<ReadPosition> DecodePosition(std::string_view token, size_t topic_count);

}  // namespace dcm
