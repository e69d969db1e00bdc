#include "src/common/time_format.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>

namespace dcm {
namespace {

bool ReadInt(std::string_view text, size_t pos, size_t len, int* out) {
  if (pos + len > text.size()) return false;
  for (size_t i = pos; i < pos + len; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;  // from_chars would accept a '-' sign
  }
  auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + pos + len, *out);
  return ec == std::errc() && ptr == text.data() + pos + len;
}

}  // namespace

std::string FormatRfc3339Millis(int64_t unix_millis) {
  using namespace std::chrono;
  const sys_time<milliseconds> tp{milliseconds(unix_millis)};
  const auto day = floor<days>(tp);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> hms{tp - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", int(ymd.year()),
                     unsigned(ymd.month()), unsigned(ymd.day()), hms.hours().count(),
                     hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

std::optional<int64_t> ParseRfc3339(std::string_view t) {
  int y, mo, d, h, mi, s;
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') ||
      t[13] != ':' || t[16] != ':') {
    return std::nullopt;
  }
  if (!ReadInt(t, 0, 4, &y) || !ReadInt(t, 5, 2, &mo) || !ReadInt(t, 8, 2, &d) ||
      !ReadInt(t, 11, 2, &h) || !ReadInt(t, 14, 2, &mi) || !ReadInt(t, 17, 2, &s)) {
    return std::nullopt;
  }
  size_t pos = 19;
  int64_t millis = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      if (digits < 3) millis = millis * 10 + (t[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0 || digits > 9) return std::nullopt;
    for (int i = digits; i < 3; ++i) millis *= 10;
  }
  int64_t offset_minutes = 0;
  if (pos < t.size() && (t[pos] == 'Z' || t[pos] == 'z')) {
    ++pos;
  } else if (pos + 6 == t.size() && (t[pos] == '+' || t[pos] == '-') && t[pos + 3] == ':') {
    int oh, om;
    if (!ReadInt(t, pos + 1, 2, &oh) || !ReadInt(t, pos + 4, 2, &om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_minutes = (t[pos] == '+' ? 1 : -1) * (oh * 60 + om);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != t.size()) return std::nullopt;
  using namespace std::chrono;
  const year_month_day ymd{year(y), month(mo), day(d)};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return std::nullopt;
  const int64_t day_ms = duration_cast<milliseconds>(sys_days(ymd).time_since_epoch()).count();
  return day_ms + ((h * 60 + mi) * 60 + s) * 1000LL + millis - offset_minutes * 60000LL;
}

}  // namespace dcm
