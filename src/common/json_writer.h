// JsonWriter: a small, fast JSON emitter (hand append + std::to_chars; measured as the fastest
// option in ../shared/HTTP-NOTES.md). Strings are escaped per RFC 8259 and validated as UTF-8:
// invalid sequences are replaced by U+FFFD, so the output is always valid JSON and valid UTF-8.
//
// Usage: w.BeginObject(); w.Key("a"); w.Int(1); w.EndObject(); std::string s = w.Take();
// Commas are inserted automatically. Not thread-safe; one writer per output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcm {

class JsonWriter {
 public:
  JsonWriter() { out_.reserve(256); }

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  void Double(double value);
  void Bool(bool value);
  void Null();
  // Appends pre-serialised JSON (for example a minified object kept from a parse) verbatim.
  // The caller guarantees it is valid JSON.
  void Raw(std::string_view json);

  // Convenience: Key + value.
  void Field(std::string_view key, std::string_view value) { Key(key), String(value); }
  void Field(std::string_view key, const char* value) { Key(key), String(value); }
  void Field(std::string_view key, int64_t value) { Key(key), Int(value); }
  void Field(std::string_view key, int value) { Key(key), Int(value); }
  void Field(std::string_view key, bool value) { Key(key), Bool(value); }

  // Key + an array of the strings in `items`.
  template <class Strings>
  void StringArray(std::string_view key, const Strings& items) {
    Key(key);
    BeginArray();
    for (const auto& item : items) String(item);
    EndArray();
  }

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Separate();

  std::string out_;
  // One entry per open container: true once it holds an element (so the next needs a comma).
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

// The code point of the valid UTF-8 sequence at s[i] and its length, or length 0 if it is
// invalid (overlongs, surrogates, above U+10FFFF, truncated: RFC 3629). JsonWriter's repair and
// SanitizeText (reply_summary.h) both read UTF-8 through it.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp);

// Appends `value` escaped (without quotes) to `out`, replacing invalid UTF-8 with U+FFFD.
void AppendJsonEscaped(std::string& out, std::string_view value);

}  // namespace dcm
