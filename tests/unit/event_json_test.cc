// Scheduled events on the wire (server/event_json.h) and the RFC 3339 times they are written in
// (common/wire_time.h): every field read or refused with the message that names it, answers
// written and read back, and the time grammar's edges.
#include "server/event_json.h"

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/wire_errors.h"
#include "common/wire_time.h"
#include "core/room_event.h"
#include "core/room_types.h"
#include "server/page_settings.h"

namespace anteroom::server {
namespace {

namespace json = boost::json;

constexpr int64_t k0900 = 1'796'115'600'000;  // 2026-12-01T09:00:00Z
constexpr int64_t kHour = 3'600'000;

json::object Body(std::string_view text) { return json::parse(text).as_object(); }

// ---- RFC 3339 (common/wire_time.h) ---------------------------------------------------------

TEST(WireTimeTest, ReadsUtcAndNumericOffsets) {
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00Z"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T10:00:00.250+01:00"), k0900 + 250);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00+00:00"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00-00:00"), k0900) << "RFC 3339's unknown offset";
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T03:30:00-05:30"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-02T08:59:00+23:59"), k0900) << "the largest offset";
  EXPECT_EQ(ParseRfc3339Ms("2026-11-30T09:01:00-23:59"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T00:00:00+09:00"), k0900 - 18 * kHour)
      << "the offset crosses the date";
}

TEST(WireTimeTest, LowercaseTAndZAreRead) {
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01t09:00:00z"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01t09:00:00Z"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.5z"), k0900 + 500);
}

TEST(WireTimeTest, FractionalSecondsPastTheMillisecondAreTruncated) {
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.1Z"), k0900 + 100);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.25Z"), k0900 + 250);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.001Z"), k0900 + 1);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.999Z"), k0900 + 999);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.000Z"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.2509Z"), k0900 + 250);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.123456Z"), k0900 + 123) << "Python's microseconds";
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.999999999Z"), k0900 + 999)
      << "Go's nanoseconds: truncated, never rounded into the next second";
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T10:00:00.0009+01:00"), k0900);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.1234567890Z"), std::nullopt) << "ten digits";
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.Z"), std::nullopt) << "a point with no digit";
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00,5Z"), std::nullopt) << "ISO 8601's comma";
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00.-5Z"), std::nullopt);
}

TEST(WireTimeTest, LeapSecondsAreRefused) {
  EXPECT_EQ(ParseRfc3339Ms("2016-12-31T23:59:60Z"), std::nullopt) << "a real leap second";
  EXPECT_EQ(ParseRfc3339Ms("2016-12-31T23:59:60.500Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339Ms("2017-01-01T00:59:60+01:00"), std::nullopt);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:60Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339Ms("2016-12-31T23:59:59.999Z"), 1'483'228'799'999);
}

TEST(WireTimeTest, TheCalendarIsChecked) {
  EXPECT_EQ(ParseRfc3339Ms("2024-02-29T00:00:00Z"), 1'709'164'800'000);
  EXPECT_EQ(ParseRfc3339Ms("2000-02-29T00:00:00Z"), 951'782'400'000) << "divisible by 400";
  for (const char* bad : {"2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
                          "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-12-00T00:00:00Z",
                          "2026-12-32T00:00:00Z", "2026-12-01T24:00:00Z", "2026-12-01T09:60:00Z",
                          "2026-12-01T09:00:61Z", "2026-12-01T99:99:99Z"}) {
    EXPECT_EQ(ParseRfc3339Ms(bad), std::nullopt) << bad;
  }
}

TEST(WireTimeTest, OffsetsOutsideTheirRangeOrShapeAreRefused) {
  for (const char* bad :
       {"2026-12-01T09:00:00+24:00", "2026-12-01T09:00:00+01:60", "2026-12-01T09:00:00+0100",
        "2026-12-01T09:00:00+01", "2026-12-01T09:00:00+1:00", "2026-12-01T09:00:00+01:00:00",
        "2026-12-01T09:00:00 +01:00", "2026-12-01T09:00:00UTC", "2026-12-01T09:00:00GMT",
        "2026-12-01T09:00:00ZZ", "2026-12-01T09:00:00", "2026-12-01T09:00:00.250"}) {
    EXPECT_EQ(ParseRfc3339Ms(bad), std::nullopt) << bad;
  }
}

TEST(WireTimeTest, TimesOutsideTheEnginesRangeAreRefused) {
  EXPECT_EQ(ParseRfc3339Ms("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339Ms("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(ParseRfc3339Ms("3000-01-01T00:00:00Z"), core::kLatestTimeMs);
  EXPECT_EQ(ParseRfc3339Ms("3000-01-01T00:00:00.000999Z"), core::kLatestTimeMs)
      << "truncated to the last ms in range";
  EXPECT_EQ(ParseRfc3339Ms("3000-01-01T01:00:00+01:00"), core::kLatestTimeMs);
  EXPECT_EQ(ParseRfc3339Ms("2999-12-31T23:59:59.999Z"), core::kLatestTimeMs - 1);
  for (const char* bad :
       {"1969-12-31T23:59:59.999Z", "1970-01-01T00:30:00+01:00", "0000-01-01T00:00:00Z",
        "1000-01-01T00:00:00Z", "3000-01-01T00:00:00.001Z", "2999-12-31T23:00:00-02:00",
        "9999-12-31T23:59:59Z"}) {
    EXPECT_EQ(ParseRfc3339Ms(bad), std::nullopt) << bad;
  }
}

TEST(WireTimeTest, GarbageIsRefused) {
  const std::string nul("2026-12-01T09:00:00\0Z", 21);
  for (std::string_view bad : std::vector<std::string_view>{
           "",
           "Z",
           "T",
           "now",
           "2026",
           "2026-12-01",
           "09:00:00Z",
           "2026-12-01T09:00Z",
           "2026-12-01 09:00:00Z",
           "2026-12-01_09:00:00Z",
           "2026-12-01T09:00:00 Z",
           " 2026-12-01T09:00:00Z",
           "2026-12-01T09:00:00Z ",
           "2026-12-01T09:00:00Zx",
           "\t2026-12-01T09:00:00Z",
           "+2026-12-01T09:00:00Z",
           "-2026-12-01T09:00:00Z",
           "+02026-12-01T09:00:00Z",
           "26-12-01T09:00:00Z",
           "2026-1-01T09:00:00Z",
           "2026-12-1T09:00:00Z",
           "2026-12-01T9:00:00Z",
           "2026/12/01T09:00:00Z",
           "20261201T090000Z",
           "2026-W48-2T09:00:00Z",
           "2026-335T09:00:00Z",
           "1796115600000",
           "\xef\xbc\x92\xef\xbc\x90\xef\xbc\x92\xef\xbc\x96-12-01T09:00:00Z",
           "2026-12-01T09:00:00\xc2\xa0Z",
           nul}) {
    EXPECT_EQ(ParseRfc3339Ms(bad), std::nullopt) << bad;
  }
}

TEST(WireTimeTest, OverlongTextIsRefusedAtOnce) {
  const std::string longest = "2026-12-01T10:00:00.123456789+01:00";
  ASSERT_EQ(longest.size(), kMaxRfc3339Bytes);
  EXPECT_EQ(ParseRfc3339Ms(longest), k0900 + 123);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T10:00:00.1234567890+01:00"), std::nullopt);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00Z" + std::string(1 << 20, '0')), std::nullopt);
  EXPECT_EQ(ParseRfc3339Ms("2026-12-01T09:00:00." + std::string(1 << 20, '0') + "Z"), std::nullopt);
}

TEST(WireTimeTest, FormatWritesUtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339Ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(k0900), "2026-12-01T09:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(k0900 + 250), "2026-12-01T09:00:00.250Z");
  EXPECT_EQ(FormatRfc3339Ms(1'709'164'800'001), "2024-02-29T00:00:00.001Z");
  EXPECT_EQ(FormatRfc3339Ms(core::kLatestTimeMs), "3000-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(-1), "1970-01-01T00:00:00.000Z") << "clamped";
  EXPECT_EQ(FormatRfc3339Ms(INT64_MIN), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(core::kLatestTimeMs + 1), "3000-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(INT64_MAX), "3000-01-01T00:00:00.000Z");
}

// The property: every ms in range is written as text that reads back to it, always 24 bytes,
// and the texts sort as the times do.
TEST(WireTimeTest, FormatThenParseIsTheIdentityOverTheRange) {
  std::mt19937_64 rng(20261201);
  std::uniform_int_distribution<int64_t> any(0, core::kLatestTimeMs);
  std::vector<int64_t> times = {0,
                                1,
                                999,
                                1000,
                                59'999,
                                86'399'999,
                                86'400'000,
                                k0900,
                                951'782'400'000,
                                core::kLatestTimeMs - 1,
                                core::kLatestTimeMs};
  for (int i = 0; i < 100'000; ++i) times.push_back(any(rng));
  std::string previous;
  int64_t previous_ms = -1;
  for (int64_t ms : times) {
    const std::string text = FormatRfc3339Ms(ms);
    ASSERT_EQ(text.size(), 24u) << ms;
    ASSERT_EQ(ParseRfc3339Ms(text), ms) << text;
    if (previous_ms >= 0) {
      ASSERT_EQ(previous < text, previous_ms < ms) << previous << " " << text;
    }
    previous = text;
    previous_ms = ms;
  }
}

// ---- The wire's names of core/room_event.h -------------------------------------------------

TEST(RoomEventNamesTest, EachNameReadsBackToItsValue) {
  for (auto method : {core::QueueingMethod::kFifo, core::QueueingMethod::kRandom,
                      core::QueueingMethod::kPassthrough, core::QueueingMethod::kReject,
                      core::QueueingMethod::kQueueAll}) {
    EXPECT_EQ(core::ParseQueueingMethod(core::ToString(method)), method);
    EXPECT_NE(core::kQueueingMethods.find(core::ToString(method)), std::string_view::npos)
        << "kQueueingMethods lists " << core::ToString(method);
  }
  for (auto scope : {core::PrequeueScope::kNew, core::PrequeueScope::kAll}) {
    EXPECT_EQ(core::ParsePrequeueScope(core::ToString(scope)), scope);
    EXPECT_NE(wire::kPrequeueScopes.find(core::ToString(scope)), std::string_view::npos);
  }
  EXPECT_STREQ(core::ToString(core::QueueingMethod::kQueueAll), "queue_all");
  EXPECT_STREQ(core::ToString(core::EventStage::kScheduled), "scheduled");
  EXPECT_STREQ(core::ToString(core::EventStage::kPrequeue), "prequeue");
  EXPECT_STREQ(core::ToString(core::EventStage::kRunning), "running");
  EXPECT_STREQ(core::ToString(core::EventStage::kEnded), "ended");
  EXPECT_STREQ(core::ToString(core::RoomPhase::kOpen), "open");
  EXPECT_STREQ(core::ToString(core::RoomPhase::kQueue), "queue");
  EXPECT_STREQ(core::ToString(core::RoomPhase::kPrequeue), "prequeue");
  EXPECT_STREQ(core::ToString(core::RoomPhase::kClosed), "closed");
}

TEST(RoomEventNamesTest, OtherSpellingsAreNotNames) {
  for (const char* bad : {"", "FIFO", "Fifo", "queue-all", "queueall", "fifo ", "lifo"}) {
    EXPECT_EQ(core::ParseQueueingMethod(bad), std::nullopt) << bad;
  }
  for (const char* bad : {"", "NEW", "All", "none", "everyone"}) {
    EXPECT_EQ(core::ParsePrequeueScope(bad), std::nullopt) << bad;
  }
}

// ---- ReadEventSpec ---------------------------------------------------------------------------

TEST(ReadEventSpecTest, ReadsEveryField) {
  auto spec = ReadEventSpec(Body(R"({
      "name": "Winter drop",
      "prequeue_at": "2026-12-01T08:30:00Z",
      "starts_at": "2026-12-01T10:00:00.250+01:00",
      "ends_at": 1796122800000,
      "shuffle_at_start": true,
      "prequeue_scope": "all",
      "suspended": true,
      "overrides": {"capacity": 500, "admit_per_minute": 1200, "grace_ms": 0,
                    "checkin_timeout_ms": 20000, "queueing_method": "random",
                    "page": {"title": "Winter drop", "colors": {"accent": "#2F6FDE"}}}})"));
  ASSERT_TRUE(spec.ok()) << spec.message();
  core::EventSpec want;
  want.name = "Winter drop";
  want.prequeue_at = k0900 - kHour / 2;
  want.starts_at = k0900 + 250;
  want.ends_at = k0900 + 2 * kHour;
  want.shuffle_at_start = true;
  want.prequeue_scope = core::PrequeueScope::kAll;
  want.suspended = true;
  want.overrides.capacity = 500;
  want.overrides.admit_per_minute = 1200;
  want.overrides.grace_ms = 0;
  want.overrides.checkin_timeout_ms = 20000;
  want.overrides.queueing_method = core::QueueingMethod::kRandom;
  want.overrides.page = R"({"title":"Winter drop","colors":{"accent":"#2f6fde"}})";
  EXPECT_EQ(*spec, want);
}

TEST(ReadEventSpecTest, OptionalFieldsTakeTheirDefaults) {
  auto spec = ReadEventSpec(Body(R"({"starts_at": 1796115600000, "ends_at": 1796119200000})"));
  ASSERT_TRUE(spec.ok()) << spec.message();
  core::EventSpec want;
  want.starts_at = k0900;
  want.ends_at = k0900 + kHour;
  EXPECT_EQ(*spec, want);
  EXPECT_EQ(spec->name, "");
  EXPECT_EQ(spec->prequeue_at, std::nullopt);
  EXPECT_EQ(spec->prequeue_scope, core::PrequeueScope::kNew);
  EXPECT_FALSE(spec->shuffle_at_start);
  EXPECT_FALSE(spec->suspended);
  EXPECT_EQ(spec->overrides, core::EventOverrides{});

  auto nulls = ReadEventSpec(Body(
      R"({"prequeue_at": null, "starts_at": 1796115600000, "ends_at": 1796119200000,
          "overrides": {}})"));
  ASSERT_TRUE(nulls.ok()) << nulls.message();
  EXPECT_EQ(*nulls, want) << "a null prequeue_at and empty overrides are the defaults";
}

TEST(ReadEventSpecTest, CrossFieldRulesAreLeftToCore) {
  // ends before it starts, a pre-queue after the start: each time is valid on its own.
  auto spec = ReadEventSpec(
      Body(R"({"prequeue_at": 1796119200000, "starts_at": 1796115600000, "ends_at": 0})"));
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->ends_at, 0);
}

TEST(ReadEventSpecTest, LimitsAreInclusive) {
  const std::string name(core::kMaxEventNameBytes, 'n');
  auto spec = ReadEventSpec(Body(R"({"name": ")" + name +
                                 R"(", "starts_at": 0, "ends_at": 32503680000000,
          "overrides": {"capacity": 1000000000, "admit_per_minute": 1, "grace_ms": 604800000,
                        "checkin_timeout_ms": 0}})"));
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->name, name);
  EXPECT_EQ(spec->ends_at, core::kLatestTimeMs);
  EXPECT_EQ(spec->overrides.capacity, core::kMaxCapacity);

  // The name's limit counts bytes: 128 two-byte characters fit, 129 do not.
  std::string two_bytes;
  for (int i = 0; i < 128; ++i) two_bytes += "\xc3\xa9";
  EXPECT_TRUE(
      ReadEventSpec(Body(R"({"name": ")" + two_bytes + R"(", "starts_at": 0, "ends_at": 1})"))
          .ok());
  EXPECT_FALSE(
      ReadEventSpec(Body(R"({"name": ")" + two_bytes + R"(\u00e9", "starts_at": 0, "ends_at": 1})"))
          .ok());
}

// The page is the room's page object (server/page_settings.h): validated, kept canonical.
TEST(ReadEventSpecTest, ThePageIsTheRoomsPageObject) {
  auto spec = ReadEventSpec(Body(R"({"starts_at": 0, "ends_at": 1, "overrides": {"page":
      {"language": "fr", "title": "Drop"}}})"));
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->overrides.page, R"({"title":"Drop","language":"fr"})");
  json::object body{{"starts_at", 0}, {"ends_at", 1}};
  body["overrides"] =
      json::object{{"page", json::object{{"message", std::string(kMaxPageMessageBytes + 1, 'x')}}}};
  auto over = ReadEventSpec(body);
  EXPECT_EQ(over.status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(over.message(), wire::PageText("overrides.page.message", kMaxPageMessageBytes));
  auto colors = ReadEventSpec(Body(
      R"({"starts_at": 0, "ends_at": 1, "overrides": {"page": {"colors": {"text": "blue"}}}})"));
  EXPECT_EQ(colors.message(), wire::PageColors("overrides.page"));

  auto empty = ReadEventSpec(Body(R"({"starts_at": 0, "ends_at": 1, "overrides": {"page": {}}})"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->overrides.page, "{}");
}

struct Refusal {
  std::string body;
  std::string message;
};

std::string Overrides(std::string_view message) { return wire::InField("overrides", message); }

TEST(ReadEventSpecTest, EveryRefusalNamesItsField) {
  const std::string times = R"("starts_at": 1796115600000, "ends_at": 1796119200000)";
  const auto with = [&](std::string_view fields) {
    return "{" + times + ", " + std::string(fields) + "}";
  };
  const std::string long_name(core::kMaxEventNameBytes + 1, 'n');
  const std::vector<Refusal> refusals = {
      // Fields the body may not hold, typos first of all.
      {with(R"("start_at": 1)"), wire::UnknownField("start_at", wire::kEventFields)},
      {R"({"start_at": 1796115600000, "ends_at": 1796119200000})",
       wire::UnknownField("start_at", wire::kEventFields)},
      {with(R"("id": "drop")"), wire::UnknownField("id", wire::kEventFields)},
      {with(R"("starts_at_ms": 1)"), wire::UnknownField("starts_at_ms", wire::kEventFields)},
      {with(R"("Name": "x")"), wire::UnknownField("Name", wire::kEventFields)},
      {with(R"("capacity": 5)"), wire::UnknownField("capacity", wire::kEventFields)},
      {with(R"("overrides": {"capacty": 5})"), Overrides(wire::UnknownEventOverride("capacty"))},
      {with(R"("overrides": {"paused": true})"), Overrides(wire::UnknownEventOverride("paused"))},
      // Required times.
      {R"({"ends_at": 1796119200000})", wire::FieldRequired("starts_at")},
      {R"({"starts_at": 1796115600000})", wire::FieldRequired("ends_at")},
      {"{}", wire::FieldRequired("starts_at")},
      // Times that are not times in range.
      {R"({"starts_at": "tomorrow", "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": "", "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": "2026-12-01T09:00:00", "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": "2016-12-31T23:59:60Z", "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": -1, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": 32503680000001, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": 18446744073709551615, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": 1796115600000.0, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": 1.7e12, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": true, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": null, "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": [1], "ends_at": 1})", wire::BadTime("starts_at", false)},
      {R"({"starts_at": 1, "ends_at": "3000-01-01T00:00:00.001Z"})",
       wire::BadTime("ends_at", false)},
      {R"({"starts_at": 1, "ends_at": null})", wire::BadTime("ends_at", false)},
      {with(R"("prequeue_at": "2026-02-29T09:00:00Z")"), wire::BadTime("prequeue_at", true)},
      {with(R"("prequeue_at": {})"), wire::BadTime("prequeue_at", true)},
      // The other fields.
      {with(R"("name": 5)"), wire::NotAString("name")},
      {with(R"("name": null)"), wire::NotAString("name")},
      {with(R"("name": ")" + long_name + "\""), wire::LongerThan("name", core::kMaxEventNameBytes)},
      {with(R"("shuffle_at_start": "yes")"), wire::NotABoolean("shuffle_at_start")},
      {with(R"("shuffle_at_start": 1)"), wire::NotABoolean("shuffle_at_start")},
      {with(R"("prequeue_scope": "everyone")"),
       wire::NotOneOf("prequeue_scope", wire::kPrequeueScopes)},
      {with(R"("prequeue_scope": "NEW")"), wire::NotOneOf("prequeue_scope", wire::kPrequeueScopes)},
      {with(R"("prequeue_scope": 1)"), wire::NotAString("prequeue_scope")},
      {with(R"("suspended": null)"), wire::NotABoolean("suspended")},
      // Overrides: the room settings' ranges.
      {with(R"("overrides": null)"), wire::NotAnObject("overrides")},
      {with(R"("overrides": [])"), wire::NotAnObject("overrides")},
      {with(R"("overrides": "capacity=5")"), wire::NotAnObject("overrides")},
      {with(R"("overrides": {"capacity": 0})"),
       Overrides(wire::IntegerOutOfRange("capacity", 1, core::kMaxCapacity))},
      {with(R"("overrides": {"capacity": 1000000001})"),
       Overrides(wire::IntegerOutOfRange("capacity", 1, core::kMaxCapacity))},
      {with(R"("overrides": {"capacity": "5"})"), Overrides(wire::NotAnInteger("capacity"))},
      {with(R"("overrides": {"capacity": 5.5})"), Overrides(wire::NotAnInteger("capacity"))},
      {with(R"("overrides": {"admit_per_minute": 0})"),
       Overrides(wire::IntegerOutOfRange("admit_per_minute", 1, core::kMaxAdmitPerMinute))},
      {with(R"("overrides": {"admit_per_minute": null})"),
       Overrides(wire::NotAnInteger("admit_per_minute"))},
      {with(R"("overrides": {"grace_ms": -1})"),
       Overrides(wire::IntegerOutOfRange("grace_ms", 0, core::kMaxDurationMs))},
      {with(R"("overrides": {"grace_ms": 604800001})"),
       Overrides(wire::IntegerOutOfRange("grace_ms", 0, core::kMaxDurationMs))},
      {with(R"("overrides": {"checkin_timeout_ms": 604800001})"),
       Overrides(wire::IntegerOutOfRange("checkin_timeout_ms", 0, core::kMaxDurationMs))},
      {with(R"("overrides": {"checkin_timeout_ms": true})"),
       Overrides(wire::NotAnInteger("checkin_timeout_ms"))},
      {with(R"("overrides": {"queueing_method": "lifo"})"),
       Overrides(wire::NotOneOf("queueing_method", core::kQueueingMethods))},
      {with(R"("overrides": {"queueing_method": "FIFO"})"),
       Overrides(wire::NotOneOf("queueing_method", core::kQueueingMethods))},
      {with(R"("overrides": {"queueing_method": 0})"),
       Overrides(wire::NotAString("queueing_method"))},
      {with(R"("overrides": {"page": "<h1>Drop</h1>"})"), wire::PageShape("overrides.page")},
      {with(R"("overrides": {"page": [1]})"), wire::PageShape("overrides.page")},
      {with(R"("overrides": {"page": null})"), wire::PageShape("overrides.page")},
      {with(R"("overrides": {"page": {"n": 1}})"), wire::PageShape("overrides.page")},
  };
  for (const Refusal& r : refusals) {
    auto spec = ReadEventSpec(Body(r.body));
    EXPECT_EQ(spec.status(), OpStatus::kInvalidArgument) << r.body;
    EXPECT_EQ(spec.message(), r.message) << r.body;
  }
}

TEST(ReadEventSpecTest, MessagesReadAsSentences) {
  // The wording itself, pinned once (the table above holds every case to the wire's functions).
  EXPECT_EQ(ReadEventSpec(Body(R"({"start_at": 1})")).message(),
            "'start_at' is not a field of an event (its fields: name, prequeue_at, starts_at, "
            "ends_at, shuffle_at_start, prequeue_scope, suspended, overrides)");
  EXPECT_EQ(ReadEventSpec(Body(R"({"starts_at": "soon", "ends_at": 1})")).message(),
            "'starts_at' must be an RFC 3339 time (such as 2026-12-01T09:00:00Z or "
            "2026-12-01T10:00:00.250+01:00) or an integer of ms since the epoch, from "
            "1970-01-01T00:00:00Z to 3000-01-01T00:00:00Z");
  EXPECT_EQ(ReadEventSpec(Body(R"({"starts_at": 0, "ends_at": 1,
                                   "overrides": {"queueing_method": "lifo"}})"))
                .message(),
            "'overrides': 'queueing_method' must be one of fifo, random, passthrough, reject, "
            "queue_all");
}

TEST(ReadEventSpecTest, AFieldNameIsShownShortAndPrintable) {
  const std::string key(1000, 'k');
  auto spec = ReadEventSpec(Body(R"({")" + key + R"(": 1})"));
  EXPECT_EQ(spec.message(), wire::UnknownField(key, wire::kEventFields));
  EXPECT_NE(spec.message().find("'" + std::string(64, 'k') + "...'"), std::string::npos)
      << spec.message();
  EXPECT_LT(spec.message().size(), 250u);
  auto odd = ReadEventSpec(Body(R"({"st\u00e4rts\n": 1})"));
  EXPECT_NE(odd.message().find("'st??rts?'"), std::string::npos) << odd.message();
}

// ---- Written back ----------------------------------------------------------------------------

core::EventSpec FullSpec() {
  core::EventSpec s;
  s.name = "Winter drop";
  s.prequeue_at = k0900 - kHour;
  s.starts_at = k0900;
  s.ends_at = k0900 + 2 * kHour + 250;
  s.shuffle_at_start = true;
  s.prequeue_scope = core::PrequeueScope::kAll;
  s.overrides.capacity = 500;
  s.overrides.admit_per_minute = 1200;
  s.overrides.queueing_method = core::QueueingMethod::kRandom;
  s.overrides.page = R"({"title":"Winter drop","colors":{"accent":"#2f6fde"},"language":"de"})";
  return s;
}

TEST(EventSpecJsonTest, ReadsBackToTheSameSpec) {
  std::vector<core::EventSpec> specs = {FullSpec(), core::EventSpec{}};
  core::EventSpec every_override = FullSpec();
  every_override.prequeue_at.reset();
  every_override.suspended = true;
  every_override.overrides.grace_ms = 0;
  every_override.overrides.checkin_timeout_ms = core::kMaxDurationMs;
  every_override.overrides.page = "{}";
  specs.push_back(every_override);
  // And random ones.
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<int64_t> time(0, core::kLatestTimeMs);
  for (int i = 0; i < 1000; ++i) {
    core::EventSpec s;
    s.name = std::string(rng() % 20, static_cast<char>('a' + rng() % 26));
    if (rng() % 2) s.prequeue_at = time(rng);
    s.starts_at = time(rng);
    s.ends_at = time(rng);
    s.shuffle_at_start = rng() % 2;
    s.prequeue_scope = rng() % 2 ? core::PrequeueScope::kAll : core::PrequeueScope::kNew;
    s.suspended = rng() % 2;
    if (rng() % 2) s.overrides.capacity = 1 + static_cast<int64_t>(rng() % core::kMaxCapacity);
    if (rng() % 2) s.overrides.grace_ms = static_cast<int64_t>(rng() % core::kMaxDurationMs);
    if (rng() % 2) s.overrides.queueing_method = static_cast<core::QueueingMethod>(rng() % 5);
    specs.push_back(s);
  }
  for (const core::EventSpec& spec : specs) {
    const json::object body = EventSpecJson(spec);
    auto back = ReadEventSpec(body);
    ASSERT_TRUE(back.ok()) << back.message() << " " << json::serialize(body);
    EXPECT_EQ(*back, spec) << json::serialize(body);
  }
}

TEST(EventSpecJsonTest, WritesTheBodyForm) {
  EXPECT_EQ(EventSpecJson(FullSpec()), json::parse(R"({
      "name": "Winter drop",
      "prequeue_at": "2026-12-01T08:00:00.000Z",
      "starts_at": "2026-12-01T09:00:00.000Z",
      "ends_at": "2026-12-01T11:00:00.250Z",
      "shuffle_at_start": true,
      "prequeue_scope": "all",
      "suspended": false,
      "overrides": {"capacity": 500, "admit_per_minute": 1200, "queueing_method": "random",
                    "page": {"title": "Winter drop", "colors": {"accent": "#2f6fde"},
                             "language": "de"}}})"));
  EXPECT_EQ(EventSpecJson(core::EventSpec{})["prequeue_at"], nullptr);
  EXPECT_EQ(EventSpecJson(core::EventSpec{})["overrides"], json::object{});
}

core::RoomEvent Event(core::EventStage stage) {
  core::RoomEvent e;
  e.id = "winter-drop";
  e.spec = FullSpec();
  e.stage = stage;
  return e;
}

TEST(EventJsonTest, AnswersTimesAsTextAndMsWithCountdowns) {
  const int64_t now = k0900 - kHour - 1000;  // a second before the pre-queue opens
  EXPECT_EQ(EventJson(Event(core::EventStage::kScheduled), now), json::parse(R"({
      "id": "winter-drop",
      "name": "Winter drop",
      "phase": "scheduled",
      "prequeue_at": "2026-12-01T08:00:00.000Z", "prequeue_at_ms": 1796112000000,
      "starts_at": "2026-12-01T09:00:00.000Z", "starts_at_ms": 1796115600000,
      "ends_at": "2026-12-01T11:00:00.250Z", "ends_at_ms": 1796122800250,
      "shuffle_at_start": true,
      "prequeue_scope": "all",
      "suspended": false,
      "overrides": {"capacity": 500, "admit_per_minute": 1200, "queueing_method": "random",
                    "page": {"title": "Winter drop", "colors": {"accent": "#2f6fde"},
                             "language": "de"}},
      "prequeue_in_ms": 1000,
      "starts_in_ms": 3601000,
      "ends_in_ms": 10801250,
      "shuffle": null})"));
}

TEST(EventJsonTest, CountdownsStopWhenTheirTimeHasCome) {
  auto at_start = EventJson(Event(core::EventStage::kRunning), k0900);
  EXPECT_EQ(at_start["phase"], "running");
  EXPECT_FALSE(at_start.contains("prequeue_in_ms"));
  EXPECT_FALSE(at_start.contains("starts_in_ms")) << "a start at now is not in the future";
  EXPECT_EQ(at_start["ends_in_ms"], 2 * kHour + 250);

  auto after = EventJson(Event(core::EventStage::kEnded), k0900 + 3 * kHour);
  EXPECT_EQ(after["phase"], "ended");
  EXPECT_FALSE(after.contains("starts_in_ms"));
  EXPECT_FALSE(after.contains("ends_in_ms"));

  core::RoomEvent no_prequeue = Event(core::EventStage::kScheduled);
  no_prequeue.spec.prequeue_at.reset();
  auto before = EventJson(no_prequeue, k0900 - 5);
  EXPECT_EQ(before["prequeue_at"], nullptr);
  EXPECT_EQ(before["prequeue_at_ms"], nullptr);
  EXPECT_FALSE(before.contains("prequeue_in_ms"));
  EXPECT_EQ(before["starts_in_ms"], 5);
}

TEST(EventJsonTest, PhaseNamesEachStageAndSuspension) {
  for (auto stage : {core::EventStage::kScheduled, core::EventStage::kPrequeue,
                     core::EventStage::kRunning, core::EventStage::kEnded}) {
    core::RoomEvent e = Event(stage);
    EXPECT_EQ(EventJson(e, k0900)["phase"], core::ToString(stage));
    e.spec.suspended = true;
    const char* want = stage == core::EventStage::kEnded ? "ended" : "suspended";
    EXPECT_EQ(EventJson(e, k0900)["phase"], want) << core::ToString(stage);
    EXPECT_EQ(EventJson(e, k0900)["suspended"], true);
  }
}

TEST(EventJsonTest, AnswersTheDrawOnceMade) {
  core::RoomEvent e = Event(core::EventStage::kRunning);
  core::ShuffleOutcome shuffle;
  for (size_t i = 0; i < shuffle.seed.size(); ++i) shuffle.seed[i] = static_cast<uint8_t>(i * 9);
  shuffle.seed[0] = 0x00;
  shuffle.seed[31] = 0xff;
  shuffle.count = 4242;
  shuffle.at = k0900 + 7;
  e.shuffle = shuffle;
  EXPECT_EQ(EventJson(e, k0900 + 10)["shuffle"], json::parse(R"({
      "seed": "0009121b242d363f48515a636c757e879099a2abb4bdc6cfd8e1eaf3fc050eff",
      "count": 4242,
      "at": "2026-12-01T09:00:00.007Z",
      "at_ms": 1796115600007})"));
}

TEST(EventJsonTest, AnAnswersWritableFieldsPutTheSameEvent) {
  // A client may GET an event, change a field and PUT the writable ones back.
  const json::object answer = EventJson(Event(core::EventStage::kPrequeue), k0900);
  json::object body;
  for (std::string_view key : {"name", "prequeue_at", "starts_at", "ends_at", "shuffle_at_start",
                               "prequeue_scope", "suspended", "overrides"}) {
    body[key] = answer.at(key);
  }
  auto spec = ReadEventSpec(body);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(*spec, FullSpec());
  // The _ms forms read as well.
  body["starts_at"] = answer.at("starts_at_ms");
  body["prequeue_at"] = answer.at("prequeue_at_ms");
  spec = ReadEventSpec(body);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(*spec, FullSpec());
}

}  // namespace
}  // namespace anteroom::server
