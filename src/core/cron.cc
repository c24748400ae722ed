#include "core/cron.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/ascii.h"
#include "common/wire_errors.h"

namespace anteroom::core {

namespace {

using date::local_days;
using date::local_seconds;

constexpr int kSecondsPerDay = 86'400;

struct FieldSpec {
  std::string_view name;  // as error messages name the field
  int min;
  int max;
  // Names of the values from `min` on ("JAN" is 1, "SUN" is 0), or empty.
  std::span<const std::string_view> names;
  bool seven_is_sunday = false;  // day-of-week: 7 is stored as 0
};

constexpr std::array<std::string_view, 12> kMonthNames = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> kDayNames = {"SUN", "MON", "TUE", "WED",
                                                       "THU", "FRI", "SAT"};

constexpr FieldSpec kSecond{"second", 0, 59, {}};
constexpr FieldSpec kMinute{"minute", 0, 59, {}};
constexpr FieldSpec kHour{"hour", 0, 23, {}};
constexpr FieldSpec kDayOfMonth{"day-of-month", 1, 31, {}};
constexpr FieldSpec kMonth{"month", 1, 12, kMonthNames};
constexpr FieldSpec kDayOfWeek{"day-of-week", 0, 7, kDayNames, true};

struct Macro {
  std::string_view name;
  std::string_view fields;
};
constexpr std::array<Macro, 7> kMacros = {{{"@yearly", "0 0 1 1 *"},
                                           {"@annually", "0 0 1 1 *"},
                                           {"@monthly", "0 0 1 * *"},
                                           {"@weekly", "0 0 * * 0"},
                                           {"@daily", "0 0 * * *"},
                                           {"@midnight", "0 0 * * *"},
                                           {"@hourly", "0 * * * *"}}};

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::vector<std::string_view> SplitBlanks(std::string_view text) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && IsBlank(text[at])) ++at;
    const size_t begin = at;
    while (at < text.size() && !IsBlank(text[at])) ++at;
    if (at > begin) out.push_back(text.substr(begin, at - begin));
  }
  return out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A number of at most four digits (longer ones are out of every field's range), or -1.
int SmallNumber(std::string_view s) {
  if (!AllDigits(s) || s.size() > 4) return -1;
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

// What one value of a field reads as: its number, a name's number, or why not.
struct Value {
  enum Kind { kGood, kNotAValue, kOutOfRange } kind;
  int number = 0;
};

Value ReadValue(const FieldSpec& field, std::string_view text) {
  if (AllDigits(text)) {
    const int v = SmallNumber(text);
    if (v < field.min || v > field.max) return {Value::kOutOfRange};
    return {Value::kGood, v};
  }
  const std::string upper = AsciiUpper(text);
  for (size_t i = 0; i < field.names.size(); ++i) {
    if (upper == field.names[i]) {
      return {Value::kGood, static_cast<int>(i) + field.min};
    }
  }
  return {Value::kNotAValue};
}

// Sets the bits of one comma-separated field into `bits` (bit v for value v). `star` is set
// when an item is `*`-based.
template <size_t N>
OpResult<Done> ReadField(const FieldSpec& field, std::string_view text, std::bitset<N>& bits,
                         bool& star) {
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string_view item =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    const auto bad_item = [&] {
      return OpResult<Done>(OpStatus::kInvalidArgument, wire::CronBadItem(field.name, item));
    };
    const size_t slash = item.find('/');
    const std::string_view base = item.substr(0, slash);
    int step = 1;
    if (slash != std::string_view::npos) {
      const std::string_view step_text = item.substr(slash + 1);
      const int values = field.max - field.min + 1;
      step = SmallNumber(step_text);
      if (step < 1 || step > values) {
        return {OpStatus::kInvalidArgument, wire::CronBadStep(field.name, step_text, values)};
      }
    }
    int lo = field.min;
    int hi = field.max;
    if (base == "*") {
      star = true;
    } else {
      const size_t dash = base.find('-');
      const std::string_view first = base.substr(0, dash);
      const Value a = ReadValue(field, first);
      if (a.kind == Value::kNotAValue) return bad_item();
      if (a.kind == Value::kOutOfRange) {
        return {OpStatus::kInvalidArgument,
                wire::CronOutOfRange(field.name, first, field.min, field.max)};
      }
      lo = a.number;
      hi = slash == std::string_view::npos ? a.number : field.max;  // `a/n` runs to the end
      if (dash != std::string_view::npos) {
        const std::string_view second = base.substr(dash + 1);
        const Value b = ReadValue(field, second);
        if (b.kind == Value::kNotAValue) return bad_item();
        if (b.kind == Value::kOutOfRange) {
          return {OpStatus::kInvalidArgument,
                  wire::CronOutOfRange(field.name, second, field.min, field.max)};
        }
        if (b.number < a.number) {
          return {OpStatus::kInvalidArgument, wire::CronReversedRange(field.name, base)};
        }
        hi = b.number;
      }
    }
    for (int v = lo; v <= hi; v += step) {
      bits.set(static_cast<size_t>(field.seven_is_sunday ? v % 7 : v));
    }
    if (comma == std::string_view::npos) return Done{};
    at = comma + 1;
  }
}

// The length of each month in a leap year: a day that exists in no year of a month never fires.
constexpr std::array<int, 13> kLongestMonth = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

bool CanFire(const CronExpr& cron) {
  // Restricted day-of-week with restricted day-of-month: any day of the named weekdays will do,
  // and every month has each weekday. Otherwise both must match, and each (month, day) that
  // exists falls on every weekday within the 400-year cycle: a date is all it takes.
  if (cron.day_of_month_restricted && cron.day_of_week_restricted) return true;
  for (int m = 1; m <= 12; ++m) {
    if (!cron.months[static_cast<size_t>(m)]) continue;
    for (int d = 1; d <= kLongestMonth[static_cast<size_t>(m)]; ++d) {
      if (cron.days_of_month[static_cast<size_t>(d)]) return true;
    }
  }
  return false;
}

template <size_t N>
int NextSet(const std::bitset<N>& bits, int from) {
  for (int i = std::max(from, 0); i < static_cast<int>(N); ++i) {
    if (bits[static_cast<size_t>(i)]) return i;
  }
  return -1;
}

template <size_t N>
int PrevSet(const std::bitset<N>& bits, int from) {
  for (int i = std::min(from, static_cast<int>(N) - 1); i >= 0; --i) {
    if (bits[static_cast<size_t>(i)]) return i;
  }
  return -1;
}

// The first matching second of the day at or after second `tod` of it, or -1.
int FirstTimeOfDay(const CronExpr& c, int tod) {
  const int h = tod / 3600;
  const int m = tod / 60 % 60;
  const int s = tod % 60;
  for (int hour = NextSet(c.hours, h); hour >= 0; hour = NextSet(c.hours, hour + 1)) {
    const int m0 = hour == h ? m : 0;
    for (int minute = NextSet(c.minutes, m0); minute >= 0;
         minute = NextSet(c.minutes, minute + 1)) {
      const int second = NextSet(c.seconds, hour == h && minute == m ? s : 0);
      if (second >= 0) return hour * 3600 + minute * 60 + second;
    }
  }
  return -1;
}

// The last matching second of the day at or before second `tod` of it, or -1.
int LastTimeOfDay(const CronExpr& c, int tod) {
  const int h = tod / 3600;
  const int m = tod / 60 % 60;
  const int s = tod % 60;
  for (int hour = PrevSet(c.hours, h); hour >= 0; hour = PrevSet(c.hours, hour - 1)) {
    const int m0 = hour == h ? m : 59;
    for (int minute = PrevSet(c.minutes, m0); minute >= 0;
         minute = PrevSet(c.minutes, minute - 1)) {
      const int second = PrevSet(c.seconds, hour == h && minute == m ? s : 59);
      if (second >= 0) return hour * 3600 + minute * 60 + second;
    }
  }
  return -1;
}

}  // namespace

bool CronExpr::DayMatches(date::year_month_day day) const {
  if (!months[static_cast<unsigned>(day.month())]) return false;
  const bool dom = days_of_month[static_cast<unsigned>(day.day())];
  const bool dow = days_of_week[date::weekday(day).c_encoding()];
  return day_of_month_restricted && day_of_week_restricted ? dom || dow : dom && dow;
}

bool CronExpr::Matches(local_seconds t) const {
  const local_days day = date::floor<date::days>(t);
  const int tod = static_cast<int>((t - day).count());
  return DayMatches(date::year_month_day(day)) && hours[static_cast<size_t>(tod / 3600)] &&
         minutes[static_cast<size_t>(tod / 60 % 60)] && seconds[static_cast<size_t>(tod % 60)];
}

std::optional<local_seconds> CronExpr::FirstAtOrAfter(local_seconds from,
                                                      local_seconds until) const {
  local_days day = date::floor<date::days>(from);
  int tod = static_cast<int>((from - day).count());
  const local_days last =
      std::min(date::floor<date::days>(until), day + date::days(kCronSearchDays));
  while (day <= last) {
    const date::year_month_day ymd(day);
    if (!months[static_cast<unsigned>(ymd.month())]) {
      day = local_days((date::year_month(ymd.year(), ymd.month()) + date::months(1)) / 1);
      tod = 0;
      continue;
    }
    if (DayMatches(ymd)) {
      const int found = FirstTimeOfDay(*this, tod);
      if (found >= 0) {
        const local_seconds t = day + std::chrono::seconds(found);
        if (t > until) return std::nullopt;
        return t;
      }
    }
    day += date::days(1);
    tod = 0;
  }
  return std::nullopt;
}

std::optional<local_seconds> CronExpr::LastAtOrBefore(local_seconds to,
                                                      local_seconds not_before) const {
  local_days day = date::floor<date::days>(to);
  int tod = static_cast<int>((to - day).count());
  const local_days first =
      std::max(date::floor<date::days>(not_before), day - date::days(kCronSearchDays));
  while (day >= first) {
    const date::year_month_day ymd(day);
    if (!months[static_cast<unsigned>(ymd.month())]) {
      day = local_days(ymd.year() / ymd.month() / 1) - date::days(1);
      tod = kSecondsPerDay - 1;
      continue;
    }
    if (DayMatches(ymd)) {
      const int found = LastTimeOfDay(*this, tod);
      if (found >= 0) {
        const local_seconds t = day + std::chrono::seconds(found);
        if (t < not_before) return std::nullopt;
        return t;
      }
    }
    day -= date::days(1);
    tod = kSecondsPerDay - 1;
  }
  return std::nullopt;
}

OpResult<CronExpr> ParseCron(std::string_view text) {
  if (text.size() > kMaxCronBytes) {
    return {OpStatus::kInvalidArgument, wire::CronTooLong(kMaxCronBytes)};
  }
  std::vector<std::string_view> fields = SplitBlanks(text);
  if (fields.size() == 1 && fields[0].starts_with('@')) {
    const std::string lower = AsciiLower(fields[0]);
    const auto macro = std::find_if(kMacros.begin(), kMacros.end(),
                                    [&lower](const Macro& m) { return lower == m.name; });
    if (macro == kMacros.end()) {
      return {OpStatus::kInvalidArgument, wire::CronUnknownMacro(fields[0])};
    }
    fields = SplitBlanks(macro->fields);
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return {OpStatus::kInvalidArgument, wire::CronFieldCount(fields.size())};
  }
  CronExpr cron;
  const size_t at = fields.size() == 6 ? 1 : 0;
  if (at == 0) cron.seconds.set(0);
  bool unused_star = false;
  bool dom_star = false;
  bool dow_star = false;
  // In the text's order, so the first field at fault is the one named.
  for (OpResult<Done> r :
       {at == 1 ? ReadField(kSecond, fields[0], cron.seconds, unused_star) : Done{},
        ReadField(kMinute, fields[at], cron.minutes, unused_star),
        ReadField(kHour, fields[at + 1], cron.hours, unused_star),
        ReadField(kDayOfMonth, fields[at + 2], cron.days_of_month, dom_star),
        ReadField(kMonth, fields[at + 3], cron.months, unused_star),
        ReadField(kDayOfWeek, fields[at + 4], cron.days_of_week, dow_star)}) {
    if (!r.ok()) return {r.status(), r.message()};
  }
  cron.day_of_month_restricted = !dom_star;
  cron.day_of_week_restricted = !dow_star;
  if (!CanFire(cron)) return {OpStatus::kInvalidArgument, std::string(wire::kCronNeverFires)};
  return cron;
}

}  // namespace anteroom::core
