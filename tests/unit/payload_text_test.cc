// Payload texts derived from a body's source (server/payload_text.h) held to boost::json::parse:
// the same value everywhere (duplicate keys resolved alike), the same text as serializing the
// parsed payload when that is exact, and every number's text as sent.
#include "server/payload_text.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/wire_errors.h"

namespace anteroom::server {
namespace {

namespace json = boost::json;

// Random JSON text: whitespace everywhere it may go, keys from a small set (so objects repeat
// them, small and past Boost.JSON's small-object size), escapes, and numbers of every kind.
class RandomJson {
 public:
  RandomJson(uint64_t seed, bool doubles) : rng_(seed), doubles_(doubles) {}

  std::string Value(int depth = 0) {
    std::string out = Space();
    int pick = Pick(depth < 5 ? 8 : 6);
    switch (pick) {
      case 0:
        out += Pick(2) ? "true" : "false";
        break;
      case 1:
        out += "null";
        break;
      case 2:
      case 3:
        out += Number();
        break;
      case 4:
      case 5:
        out += String();
        break;
      case 6: {
        out += '[';
        int n = Pick(5);
        for (int i = 0; i < n; ++i) out += (i ? "," : "") + Value(depth + 1);
        out += Space() + ']';
        break;
      }
      default: {
        out += '{';
        int n = Pick(4) == 0 ? 40 : Pick(6);  // sometimes past the small-object size
        for (int i = 0; i < n; ++i) {
          out += (i ? "," : "") + Space() + Key() + Space() + ':' + Value(depth + 1);
        }
        out += Space() + '}';
        break;
      }
    }
    return out + Space();
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  std::string Space() {
    static const char* kSpaces[] = {"", "", "", " ", "\n\t", "\r\n  "};
    return kSpaces[Pick(6)];
  }
  std::string Key() {
    static const char* kKeys[] = {R"("a")",  R"("b")",  R"("\u0061")", R"("c\/d")",    R"("")",
                                  R"("k1")", R"("k2")", R"("k3")",     R"("payload")", R"("jobs")"};
    return kKeys[Pick(10)];
  }
  std::string String() {
    static const char* kStrings[] = {R"("")",
                                     R"("x")",
                                     R"("\"q\" \\ \/")",
                                     R"("\u00e9\u2603\ud83d\ude00")",
                                     R"("\b\f\n\r\t\u0001")",
                                     "\"caf\xc3\xa9\"",
                                     R"("-0")",
                                     R"("2024-01-02")"};
    return kStrings[Pick(8)];
  }
  std::string Number() {
    static const char* kInts[] = {
        "0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
        "42"};
    static const char* kDoubles[] = {"1.5",
                                     "-0.0",
                                     "1e5",
                                     "1E+2",
                                     "100000000000000000000001",
                                     "1e-400",
                                     "0.1000000000000000055511151231257827",
                                     "-18446744073709551616",
                                     "2.50",
                                     "1e308"};
    if (doubles_ && Pick(2)) return kDoubles[Pick(10)];
    return kInts[Pick(8)];
  }

  std::mt19937_64 rng_;
  bool doubles_;
};

TEST(PayloadTextTest, SameValueAsParseAndSameTextWhenSerializingIsExact) {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    bool doubles = seed % 2 == 0;
    RandomJson gen(seed, doubles);
    std::string payload = gen.Value();
    for (bool batch : {false, true}) {
      std::string body = batch ? R"({"jobs": [{"payload": 1}, {"payload":)" + payload +
                                     R"(, "x": 1}, 7, {"payload": )" + gen.Value() + "}]}"
                               : R"({"x": [1.5], "payload":)" + payload + "}";
      json::value parsed = json::parse(body);
      auto texts = SourcePayloadTexts(body, batch);
      ASSERT_TRUE(texts.has_value()) << body;
      const json::value& want =
          batch ? parsed.at("jobs").at(1).at("payload") : parsed.at("payload");
      size_t index = batch ? 1 : 0;
      ASSERT_GT(texts->size(), index) << body;
      const std::string& text = (*texts)[index];
      boost::system::error_code ec;
      json::value back = json::parse(text, ec);
      ASSERT_FALSE(ec) << "not JSON: " << text << "\nfrom " << body;
      EXPECT_EQ(back, want) << "seed " << seed << ": " << text << "\nfrom " << body;
      if (!doubles && payload.find("-0") == std::string::npos) {  // no -0 (read as 0)
        EXPECT_EQ(text, json::serialize(want)) << "seed " << seed << " from " << body;
      }
      PayloadTexts lazy(body, batch);
      auto of = lazy.Of(want, index);
      ASSERT_TRUE(of.ok()) << of.message();
      EXPECT_EQ(*of, text) << "the fast path and the source agree; seed " << seed;
    }
  }
}

TEST(PayloadTextTest, NumbersKeepTheirText) {
  for (std::string n : {"100000000000000000000001", "-100000000000000000000001",
                        "0.1000000000000000055511151231257827", "1.5", "1e5", "-0.0", "-0", "1E+2",
                        "1e-400", "2.50", "0", "-1", "18446744073709551616"}) {
    std::string body = R"({"payload": [ )" + n + R"( , {"n": )" + n + "} ]}";
    PayloadTexts texts(body, false);
    auto text = texts.Of(json::parse(body).at("payload"), 0);
    ASSERT_TRUE(text.ok()) << text.message();
    EXPECT_EQ(*text, "[" + n + R"(,{"n":)" + n + "}]");
  }
}

TEST(PayloadTextTest, DuplicatesResolvedAsParseDoes) {
  // A repeated "jobs" and a repeated "payload": the last ones.
  std::string body =
      R"({"jobs": [{"payload": 9.5}], "jobs": [{"payload": 1.5, "payload": {"a": 1, "a": 2.5}}]})";
  auto texts = SourcePayloadTexts(body, true);
  ASSERT_TRUE(texts.has_value());
  ASSERT_EQ(texts->size(), 1u);
  EXPECT_EQ((*texts)[0], R"({"a":2.5})");
  auto single =
      SourcePayloadTexts(R"({"payload": 1.5, "x": {"payload": 2}, "payload": 3.5})", false);
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(single->at(0), "3.5") << "a nested \"payload\" is not the job's";
}

// Results (each element of an array), progress (one member) and job templates (a member's
// "payload") are kept as sent, as payloads are; a null or a value elsewhere is no text of theirs.
TEST(PayloadTextTest, OtherPlacesKeepTheirNumbersAsSent) {
  std::string acks = R"({"leases": ["a", "b", "c"], "results": [1.5, null, {"x": [-0, 0.10]}],)"
                     R"( "payload": 9.5})";
  auto results = SourceTexts(acks, TextPlace{.key = "results", .each = true, .inner = ""});
  ASSERT_TRUE(results.has_value());
  EXPECT_EQ(*results, (std::vector<std::string>{"1.5", "null", R"({"x":[-0,0.10]})"}));
  PayloadTexts lazy(acks, TextPlace{.key = "results", .each = true, .inner = ""});
  json::value body = json::parse(acks);
  auto third = lazy.Of(body.at("results").at(2), 2);
  ASSERT_TRUE(third.ok()) << third.message();
  EXPECT_EQ(*third, R"({"x":[-0,0.10]})");

  std::string progress = R"({"lease": "a", "progress": {"done": 2.50, "of": 1E3}})";
  auto one = SourceTexts(progress, TextPlace{.key = "progress", .each = false, .inner = ""});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(*one, (std::vector<std::string>{R"({"done":2.50,"of":1E3})"}));

  // A batch's callback: the payload of the member named, not of another (nor a nested one).
  std::string batch = R"({"on_success": {"payload": 0.5, "priority": 1}, )"
                      R"("on_dead": {"payload": {"payload": 2.0}}})";
  auto dead = SourceTexts(batch, TextPlace{.key = "on_dead", .each = false, .inner = "payload"});
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(*dead, (std::vector<std::string>{R"({"payload":2.0})"}));
  auto ok = SourceTexts(batch, TextPlace{.key = "on_success", .each = false, .inner = "payload"});
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, (std::vector<std::string>{"0.5"}));
  auto none =
      SourceTexts(batch, TextPlace{.key = "on_complete", .each = false, .inner = "payload"});
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());

  // A repeated array member: the last, as parse keeps.
  auto last = SourceTexts(R"({"results": [1.5, 2.5], "results": [3.5]})",
                          TextPlace{.key = "results", .each = true, .inner = ""});
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, (std::vector<std::string>{"3.5"}));
}

TEST(PayloadTextTest, NonFiniteNumbersAreRefused) {
  for (std::string payload : {"1e400", "-1e400", R"([1, {"a": 1E999}])"}) {
    std::string body = R"({"payload": )" + payload + "}";
    PayloadTexts texts(body, false);
    auto text = texts.Of(json::parse(body).at("payload"), 0);
    ASSERT_FALSE(text.ok()) << payload;
    EXPECT_EQ(text.message(), wire::kPayloadNotFinite);
  }
}

}  // namespace
}  // namespace anteroom::server
