// DecodedCache: the decoded form of the JSON a projection last read or wrote under each key, for
// folds that decode and re-encode one record per event (health: every probe; instances: every
// step of a saga). A rebuild or a replay then costs one encode per event instead of a decode and
// an encode (BENCHMARKS.md "Rebuild").
//
// An entry is used only while the store still holds exactly the JSON it was decoded from or
// encoded to: a batch that was never written, or a record changed by someone else, costs a
// decode, never a wrong fold. Bounded: cleared when full. One thread (the projection's).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "src/common/result.h"

namespace dcm {

template <typename T>
class DecodedCache {
 public:
  using Decoder = Result<T> (*)(std::string_view);

  DecodedCache(Decoder decode, size_t max_entries) : decode_(decode), max_entries_(max_entries) {}

  // The record `json`, the value stored under `key`, decodes to: the cached one when it was
  // decoded from or encoded to that same JSON, else decoded now and remembered. The pointer stays
  // valid until the next call. Whoever changes the record must call Written (the new JSON) or
  // Forget before the next Find.
  Result<T*> Find(const std::string& key, std::string json) {
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.json == json) return &it->second.record;
    auto decoded = decode_(json);
    if (!decoded) {
      if (it != entries_.end()) entries_.erase(it);
      return tl::unexpected(decoded.error());
    }
    if (it == entries_.end()) {
      if (entries_.size() >= max_entries_) entries_.clear();
      it = entries_.emplace(key, Entry{}).first;
    }
    it->second.json = std::move(json);
    it->second.record = std::move(*decoded);
    return &it->second.record;
  }

  // `json`, the encoding of `record`, is now what the batch holds under `key`.
  void Written(const std::string& key, std::string json, T record) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= max_entries_) entries_.clear();
      it = entries_.emplace(key, Entry{}).first;
    }
    it->second.json = std::move(json);
    it->second.record = std::move(record);
  }

  // The record Find returned for `key`, changed in place, is now stored as `json`.
  void Written(const std::string& key, std::string json) {
    auto it = entries_.find(key);
    if (it != entries_.end()) it->second.json = std::move(json);
  }

  void Forget(const std::string& key) { entries_.erase(key); }

 private:
  struct Entry {
    std::string json;
    T record;
  };
  Decoder decode_;
  size_t max_entries_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace dcm
