// ParseCron: what it reads and refuses, and the sets it reads into; the searches on the local
// calendar.

#include "core/cron.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "common/wire_errors.h"

namespace anteroom::core {
namespace {

using date::local_days;
using date::local_seconds;

CronExpr Parsed(std::string_view text) {
  OpResult<CronExpr> r = ParseCron(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.message();
  return r.ok() ? *r : CronExpr{};
}

// The values of a field, "1,2,3", or "*" when all of its range are there.
template <size_t N>
std::string Bits(const std::bitset<N>& bits) {
  const size_t all = N == 32 ? 31 : N == 13 ? 12 : N;  // days of month and months start at 1
  if (bits.count() == all) return "*";
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (!bits[i]) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(i);
  }
  return out;
}

local_seconds Local(int y, unsigned mo, unsigned d, int h, int mi, int s = 0) {
  return local_days(date::year(y) / mo / d) + std::chrono::hours(h) + std::chrono::minutes(mi) +
         std::chrono::seconds(s);
}

TEST(CronParseTest, AcceptsTheUsualShapes) {
  const struct {
    std::string_view text;
    std::string_view minutes, hours, doms, months, dows;
  } kCases[] = {
      {"* * * * *", "*", "*", "*", "*", "*"},
      {"0 9 * * 1-5", "0", "9", "*", "*", "1,2,3,4,5"},
      {"*/15 * * * *", "0,15,30,45", "*", "*", "*", "*"},
      {"5-20/5 0,12 1,15 * *", "5,10,15,20", "0,12", "1,15", "*", "*"},
      {"50/5 23 * jan,Jul SUN", "50,55", "23", "*", "1,7", "0"},
      {"0 0 * * 7", "0", "0", "*", "*", "0"},
      {"0 0 * * 5-7", "0", "0", "*", "*", "0,5,6"},
      {"0 0 * * MON-FRI/2", "0", "0", "*", "*", "1,3,5"},
      {"0 0 * FEB-apr *", "0", "0", "*", "2,3,4", "*"},
      {"  0\t0  *  *  *  ", "0", "0", "*", "*", "*"},
      {"0 0 29 2 *", "0", "0", "29", "2", "*"},
      {"0 0 31 * *", "0", "0", "31", "*", "*"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.text);
    const CronExpr e = Parsed(c.text);
    EXPECT_EQ(Bits(e.seconds), "0");
    EXPECT_EQ(Bits(e.minutes), c.minutes);
    EXPECT_EQ(Bits(e.hours), c.hours);
    EXPECT_EQ(Bits(e.days_of_month), c.doms);
    EXPECT_EQ(Bits(e.months), c.months);
    EXPECT_EQ(Bits(e.days_of_week), c.dows);
  }
  const CronExpr all = Parsed("* * * * *");
  EXPECT_EQ(all.minutes.count(), 60u);
  EXPECT_EQ(all.hours.count(), 24u);
  EXPECT_EQ(all.days_of_month.count(), 31u);
  EXPECT_EQ(all.months.count(), 12u);
  EXPECT_EQ(all.days_of_week.count(), 7u);
}

TEST(CronParseTest, SixFieldsPutTheSecondFirst) {
  const CronExpr e = Parsed("*/20 30 9 * * *");
  EXPECT_EQ(Bits(e.seconds), "0,20,40");
  EXPECT_EQ(Bits(e.minutes), "30");
  EXPECT_EQ(Bits(e.hours), "9");
  EXPECT_EQ(Parsed("* * * * * *").seconds.count(), 60u);
}

TEST(CronParseTest, MacrosAreTheirFiveFields) {
  EXPECT_EQ(Parsed("@yearly"), Parsed("0 0 1 1 *"));
  EXPECT_EQ(Parsed("@ANNUALLY"), Parsed("0 0 1 1 *"));
  EXPECT_EQ(Parsed("@monthly"), Parsed("0 0 1 * *"));
  EXPECT_EQ(Parsed("@weekly"), Parsed("0 0 * * 0"));
  EXPECT_EQ(Parsed("@daily"), Parsed("0 0 * * *"));
  EXPECT_EQ(Parsed(" @Midnight "), Parsed("0 0 * * *"));
  EXPECT_EQ(Parsed("@hourly"), Parsed("0 * * * *"));
}

TEST(CronParseTest, DayFieldsAreRestrictedUnlessTheyHoldAStar) {
  const CronExpr both = Parsed("0 0 1 * MON");
  EXPECT_TRUE(both.day_of_month_restricted);
  EXPECT_TRUE(both.day_of_week_restricted);
  const CronExpr stepped = Parsed("0 0 */2 * MON");
  EXPECT_FALSE(stepped.day_of_month_restricted);
  EXPECT_TRUE(stepped.day_of_week_restricted);
  EXPECT_FALSE(Parsed("0 0 * * *").day_of_week_restricted);
}

TEST(CronParseTest, RefusesWithAMessageNamingTheFault) {
  const struct {
    std::string_view text;
    std::string message;
  } kCases[] = {
      {"", wire::CronFieldCount(0)},
      {"* * * *", wire::CronFieldCount(4)},
      {"* * * * * * *", wire::CronFieldCount(7)},
      {"0 0 * * * junk", wire::CronBadItem("day-of-week", "junk")},  // six fields
      {"60 * * * *", wire::CronOutOfRange("minute", "60", 0, 59)},
      {"* 24 * * *", wire::CronOutOfRange("hour", "24", 0, 23)},
      {"* * 0 * *", wire::CronOutOfRange("day-of-month", "0", 1, 31)},
      {"* * 32 * *", wire::CronOutOfRange("day-of-month", "32", 1, 31)},
      {"* * * 13 *", wire::CronOutOfRange("month", "13", 1, 12)},
      {"* * * * 8", wire::CronOutOfRange("day-of-week", "8", 0, 7)},
      {"0 0 * * 99999999999", wire::CronOutOfRange("day-of-week", "99999999999", 0, 7)},
      {"61 * * * * *", wire::CronOutOfRange("second", "61", 0, 59)},
      {"30-10 * * * *", wire::CronReversedRange("minute", "30-10")},
      {"0 0 * * FRI-MON", wire::CronReversedRange("day-of-week", "FRI-MON")},
      {"*/0 * * * *", wire::CronBadStep("minute", "0", 60)},
      {"*/61 * * * *", wire::CronBadStep("minute", "61", 60)},
      {"*/x * * * *", wire::CronBadStep("minute", "x", 60)},
      {"1-5/ * * * *", wire::CronBadStep("minute", "", 60)},
      {"1,,2 * * * *", wire::CronBadItem("minute", "")},
      {"1, * * * *", wire::CronBadItem("minute", "")},
      {"-5 * * * *", wire::CronBadItem("minute", "-5")},
      {"1-2-3 * * * *", wire::CronBadItem("minute", "1-2-3")},
      {"*/5/5 * * * *", wire::CronBadStep("minute", "5/5", 60)},
      {"0 0 ? * MON", wire::CronBadItem("day-of-month", "?")},
      {"0 0 L * *", wire::CronBadItem("day-of-month", "L")},
      {"0 0 * * MON#2", wire::CronBadItem("day-of-week", "MON#2")},
      {"0 0 * JANUARY *", wire::CronBadItem("month", "JANUARY")},
      {"0 0 * * JAN", wire::CronBadItem("day-of-week", "JAN")},
      {"MON 0 * * *", wire::CronBadItem("minute", "MON")},
      {"0 0 * * *\n", wire::CronBadItem("day-of-week", "*\n")},
      {"@reboot", wire::CronUnknownMacro("@reboot")},
      {"@daily 0", wire::CronFieldCount(2)},
      {"0 0 30 2 *", std::string(wire::kCronNeverFires)},
      {"0 0 31 4,6,9,11 *", std::string(wire::kCronNeverFires)},
      {"0 0 30,31 FEB *", std::string(wire::kCronNeverFires)},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.text);
    OpResult<CronExpr> r = ParseCron(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status(), OpStatus::kInvalidArgument);
    EXPECT_EQ(r.message(), c.message);
  }
}

TEST(CronParseTest, LengthIsBounded) {
  std::string text = "0 0 * * *";
  text.insert(0, kMaxCronBytes - text.size(), ' ');
  EXPECT_TRUE(ParseCron(text).ok());
  text.insert(0, " ");
  OpResult<CronExpr> r = ParseCron(text);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), wire::CronTooLong(kMaxCronBytes));
}

TEST(CronParseTest, DaysThatExistOnlySometimesStillFire) {
  EXPECT_TRUE(ParseCron("0 0 29 2 *").ok());       // leap years
  EXPECT_TRUE(ParseCron("0 0 30 2 MON").ok());     // either day field: Mondays in February
  EXPECT_TRUE(ParseCron("0 0 29 2 */7").ok());     // February 29th that is a Sunday
  EXPECT_TRUE(ParseCron("0 0 30,31 1-2 *").ok());  // January has them
}

TEST(CronMatchTest, EitherDayFieldWhenBothAreRestricted) {
  const CronExpr e = Parsed("0 0 13 * FRI");         // the 13th, and every Friday
  EXPECT_TRUE(e.Matches(Local(2026, 2, 13, 0, 0)));  // Friday the 13th
  EXPECT_TRUE(e.Matches(Local(2026, 1, 13, 0, 0)));  // a Tuesday
  EXPECT_TRUE(e.Matches(Local(2026, 1, 2, 0, 0)));   // a Friday
  EXPECT_FALSE(e.Matches(Local(2026, 1, 3, 0, 0)));
  EXPECT_FALSE(e.Matches(Local(2026, 1, 13, 0, 1)));
}

TEST(CronMatchTest, BothDayFieldsWhenOneHoldsAStar) {
  const CronExpr e = Parsed("0 0 */2 * FRI");  // odd days that are Fridays
  EXPECT_TRUE(e.Matches(Local(2026, 1, 9, 0, 0)));
  EXPECT_FALSE(e.Matches(Local(2026, 1, 2, 0, 0)));  // a Friday, even
  EXPECT_FALSE(e.Matches(Local(2026, 1, 3, 0, 0)));  // odd, a Saturday
}

TEST(CronSearchTest, FirstAndLastOnTheCalendar) {
  const local_seconds far_after = Local(2100, 1, 1, 0, 0);
  const local_seconds far_before = Local(1970, 1, 1, 0, 0);
  const CronExpr weekdays = Parsed("30 9 * * MON-FRI");
  EXPECT_EQ(weekdays.FirstAtOrAfter(Local(2026, 1, 2, 9, 30), far_after),
            Local(2026, 1, 2, 9, 30));  // at `from` itself
  EXPECT_EQ(weekdays.FirstAtOrAfter(Local(2026, 1, 2, 9, 30, 1), far_after),
            Local(2026, 1, 5, 9, 30));  // over the weekend
  EXPECT_EQ(weekdays.LastAtOrBefore(Local(2026, 1, 5, 9, 29, 59), far_before),
            Local(2026, 1, 2, 9, 30));
  const CronExpr leap = Parsed("0 12 29 2 *");
  EXPECT_EQ(leap.FirstAtOrAfter(Local(2024, 3, 1, 0, 0), far_after), Local(2028, 2, 29, 12, 0));
  EXPECT_EQ(leap.LastAtOrBefore(Local(2028, 2, 29, 11, 59), far_before), Local(2024, 2, 29, 12, 0));
  // 2100 is no leap year: eight years from 2096 to 2104.
  EXPECT_EQ(leap.FirstAtOrAfter(Local(2096, 3, 1, 0, 0), Local(2200, 1, 1, 0, 0)),
            Local(2104, 2, 29, 12, 0));
  EXPECT_EQ(leap.FirstAtOrAfter(Local(2024, 3, 1, 0, 0), Local(2028, 2, 29, 11, 0)), std::nullopt);
  const CronExpr seconds = Parsed("*/20 59 23 31 12 *");
  EXPECT_EQ(seconds.FirstAtOrAfter(Local(2026, 12, 31, 23, 59, 41), far_after),
            Local(2027, 12, 31, 23, 59, 0));
  EXPECT_EQ(seconds.LastAtOrBefore(Local(2027, 12, 31, 23, 59, 19), far_before),
            Local(2027, 12, 31, 23, 59, 0));
  EXPECT_EQ(seconds.LastAtOrBefore(Local(2027, 12, 31, 23, 58, 59), far_before),
            Local(2026, 12, 31, 23, 59, 40));
}

TEST(CronSearchTest, ARareDayIsFoundWithinTheSearchSpan) {
  // February 29th on a Sunday: 2032, 2060, 2088, then 2128 (40 years: 2100 is no leap year).
  const CronExpr e = Parsed("0 0 29 2 */7");
  EXPECT_EQ(e.FirstAtOrAfter(Local(2026, 1, 1, 0, 0), Local(2999, 1, 1, 0, 0)),
            Local(2032, 2, 29, 0, 0));
  EXPECT_EQ(e.FirstAtOrAfter(Local(2032, 3, 1, 0, 0), Local(2999, 1, 1, 0, 0)),
            Local(2060, 2, 29, 0, 0));
  EXPECT_EQ(e.FirstAtOrAfter(Local(2089, 1, 1, 0, 0), Local(2999, 1, 1, 0, 0)),
            Local(2128, 2, 29, 0, 0));
}

}  // namespace
}  // namespace anteroom::core
