#include "common/wire_time.h"

#include <date/date.h>

#include <algorithm>
#include <chrono>
#include <locale>
#include <sstream>

namespace anteroom {

namespace {

using SysMs = date::sys_time<std::chrono::milliseconds>;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool Digits(std::string_view s, size_t at, size_t n) {
  if (at + n > s.size()) return false;
  return std::all_of(s.begin() + at, s.begin() + at + n, IsDigit);
}

int TwoDigits(std::string_view s, size_t at) { return (s[at] - '0') * 10 + (s[at + 1] - '0'); }

// "+hh:mm" or "-hh:mm" with hours 00-23 and minutes 00-59 (RFC 3339's time-numoffset);
// date::parse's %Ez alone would take "+24:00" and "+01:60".
bool IsNumericOffset(std::string_view s) {
  return s.size() == 6 && (s[0] == '+' || s[0] == '-') && Digits(s, 1, 2) && s[3] == ':' &&
         Digits(s, 4, 2) && TwoDigits(s, 1) <= 23 && TwoDigits(s, 4) <= 59;
}

}  // namespace

std::optional<int64_t> ParseRfc3339Ms(std::string_view text) {
  // The fixed shape, "YYYY-MM-DDThh:mm:ss", then the fraction and the offset. What is read is
  // rewritten into the one spelling date::parse takes ("T", at most three fractional digits,
  // a numeric offset); the calendar's rules and the arithmetic are the library's.
  constexpr size_t kSeconds = 19;  // the length of "YYYY-MM-DDThh:mm:ss"
  if (text.size() < kSeconds + 1 || text.size() > kMaxRfc3339Bytes) return std::nullopt;
  if (!Digits(text, 0, 4) || text[4] != '-' || !Digits(text, 5, 2) || text[7] != '-' ||
      !Digits(text, 8, 2) || (text[10] != 'T' && text[10] != 't') || !Digits(text, 11, 2) ||
      text[13] != ':' || !Digits(text, 14, 2) || text[16] != ':' || !Digits(text, 17, 2)) {
    return std::nullopt;
  }
  std::string normal(text.substr(0, kSeconds));
  normal[10] = 'T';
  size_t at = kSeconds;
  if (text[at] == '.') {
    const size_t first = ++at;
    while (at < text.size() && IsDigit(text[at])) ++at;
    const size_t count = at - first;
    if (count < 1 || count > 9) return std::nullopt;
    normal += '.';
    normal += text.substr(first, std::min<size_t>(count, 3));  // truncated to the millisecond
  }
  const std::string_view offset = text.substr(at);
  if (offset == "Z" || offset == "z") {
    normal += "+00:00";
  } else if (IsNumericOffset(offset)) {
    normal += offset;
  } else {
    return std::nullopt;
  }

  std::istringstream in(normal);
  in.imbue(std::locale::classic());
  SysMs time;
  in >> date::parse("%FT%T%Ez", time);
  if (in.fail() || in.peek() != std::istringstream::traits_type::eof()) return std::nullopt;
  const int64_t ms = time.time_since_epoch().count();
  if (ms < 0 || ms > kLatestWireTimeMs) return std::nullopt;
  return ms;
}

std::string FormatRfc3339Ms(int64_t ms) {
  ms = std::clamp<int64_t>(ms, 0, kLatestWireTimeMs);
  return date::format("%FT%TZ", SysMs(std::chrono::milliseconds(ms)));
}

}  // namespace anteroom
