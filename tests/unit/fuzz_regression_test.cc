// Inputs the fuzzers (fuzz/, scripts/fuzz.sh) found to crash or misbehave, each kept here with
// what it must do now. The same inputs are in the fuzz targets' seed corpora.
#include <gtest/gtest.h>

#include <malloc.h>

#include <boost/json/parse.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/bytes.h"
#include "common/clock.h"
#include "core/room_types.h"
#include "http/router.h"
#include "store/memory/change_record.h"
#include "store/memory/memory_backend.h"
#include "store/redis/reply_reader.h"
#include "webhook/webhook_url.h"

#if defined(__SANITIZE_ADDRESS__)
// In every ASan runtime, but g++ 12 ships no <sanitizer/allocator_interface.h> (clang does).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace anteroom {
namespace {

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// Bytes the heap holds now (the sanitizer's count under ASan, glibc's otherwise).
size_t HeapBytes() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

// log_records: a check-in record whose session length runs past the record. Replay applied
// it before noticing (an empty session from a null view: undefined behaviour in memcpy, and a
// change made from a record it then called damaged).
TEST(FuzzRegressionTest, ReplayAppliesNothingFromARecordThatDoesNotDecode) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch patch;
  patch.capacity = 2;
  patch.target_url = std::optional<std::string>("/shop");
  std::string create;
  store::EncodeChange(create, 1'700'000'000'000, "r", store::CreateRoomRecord{.patch = patch});
  ASSERT_TRUE(backend.Replay(create).ok());
  // A check-in whose session length (10,551,299) runs past its end.
  std::string check;
  store::EncodeChange(check, 1'700'000'000'001, "r", store::CheckRecord{.session = "ann"});
  const size_t session_at = 1 + 8 + 4 + 1;  // kind, time, str "r"
  std::string cut = check.substr(0, session_at) + Unhex("0300a100") + "an";
  auto r = backend.Replay(cut);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().sessions, 0u) << "nothing applied";

  // A whole check-in followed by stray bytes is damage too, and changes nothing either.
  r = backend.Replay(check + "\xff");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().sessions, 0u);
  // Nor does a queue record cut short create its queue.
  std::string push;
  store::EncodeChange(push, 1'700'000'000'001, "q", store::PushRecord{});
  r = backend.Replay(push.substr(0, push.size() - 2));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().queues, 0u);

  // The whole record still applies.
  r = backend.Replay(check);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(backend.Summarize().sessions, 1u);
}

// log_records: a room record with values the HTTP layer never passes (a check-in timeout of
// 8,700 years, a negative admission rate) was applied, and Room::Advance then looped forever;
// a record dated in the year 200 million overflowed deadlines. Both are damage now.
TEST(FuzzRegressionTest, ReplayRefusesValuesOutOfTheWireRanges) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch patch;
  patch.capacity = 2;
  patch.admit_per_minute = std::optional<int64_t>(-1);  // no rate the wire lets through
  std::string record;
  store::EncodeChange(record, 1'700'000'000'000, "r", store::CreateRoomRecord{.patch = patch});
  auto r = backend.Replay(record);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().rooms, 0u);

  patch.admit_per_minute.reset();
  store::EncodeChange(record, 1'700'000'000'000, "r", store::CreateRoomRecord{.patch = patch});
  ASSERT_TRUE(backend.Replay(record).ok());
  // A check at a time past any the clock gives.
  store::EncodeChange(record, 0x57a2000010017dc9, "r", store::CheckRecord{.session = "bob"});
  r = backend.Replay(record);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().sessions, 0u);

  // A snapshot holding such a room does not load either. Layout: u32 format, u64 rooms,
  // str "r", then the room: u32 format, i64 capacity.
  std::string state;
  ByteWriter sw(state);
  backend.SaveState(sw);
  const size_t capacity_at = 4 + 8 + 4 + 1 + 4;
  ASSERT_EQ(state[capacity_at], 2);
  state[capacity_at] = 0;
  store::MemoryBackend loaded(clock, store::MemoryBackendOptions{.run_timer = false});
  ByteReader in(state);
  EXPECT_FALSE(loaded.LoadState(in)) << "a room of capacity 0";
  patch.admit_per_minute = std::optional<int64_t>(-1);
  EXPECT_FALSE(core::InRange(patch));
  core::RoomConfig config;
  config.admit_per_minute = -1;
  EXPECT_FALSE(core::InRange(config));
  config.admit_per_minute = 600;
  EXPECT_TRUE(core::InRange(config));
}

// log_records: a snapshot cut inside a session id. The room's loader handed the reader's empty
// view (null data) to memcpy: undefined behaviour, caught by UBSan.
TEST(FuzzRegressionTest, SnapshotCutInsideASessionIdDoesNotLoad) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch patch;
  patch.capacity = 1;
  backend.PutRoom("r", patch, [](OpResult<core::RoomInfo> r) { ASSERT_TRUE(r.ok()); });
  for (const char* s : {"ann", "bobby-the-waiting-one"}) {
    backend.Check("r", s, [](OpResult<core::SessionView> r) { ASSERT_TRUE(r.ok()); });
  }
  std::string state;
  ByteWriter w(state);
  backend.SaveState(w);
  size_t at = state.find("bobby-the-waiting-one");
  ASSERT_NE(at, std::string::npos);
  for (size_t cut : {at - 2, at, at + 5}) {  // inside the length, at the id, inside the id
    store::MemoryBackend loaded(clock, store::MemoryBackendOptions{.run_timer = false});
    ByteReader in(std::string_view(state).substr(0, cut));
    EXPECT_FALSE(loaded.LoadState(in)) << "cut at " << cut;
  }
  store::MemoryBackend whole(clock, store::MemoryBackendOptions{.run_timer = false});
  ByteReader in(state);
  ASSERT_TRUE(whole.LoadState(in));
  EXPECT_EQ(whole.Summarize().sessions, 2u);
}

// resp_reader: an array header announcing 2^31-1 elements made hiredis's reply objects
// allocate the whole element table (16 GiB) before any element arrived.
TEST(FuzzRegressionTest, RespArrayCountsAllocateNothingUpFront) {
  store::redis::ReplyReader reader;
  size_t before = HeapBytes();
  ASSERT_TRUE(reader.Feed("*2147483647\r\n:1\r\n$3\r\nabc\r\n"));
  store::redis::Reply reply;
  EXPECT_EQ(reader.Next(reply), store::redis::ReplyReader::Result::kNeedMore);
  EXPECT_LT(HeapBytes() - before, size_t{1} << 20) << "memory follows the bytes received";

  // Replies that arrive whole still read, nested, after a reset.
  reader.Reset();
  ASSERT_TRUE(reader.Feed("*3\r\n:7\r\n*2\r\n$2\r\nab\r\n$-1\r\n-ERR no\r\n+OK\r\n"));
  ASSERT_EQ(reader.Next(reply), store::redis::ReplyReader::Result::kReply);
  ASSERT_EQ(reply.type, store::redis::Reply::Type::kArray);
  ASSERT_EQ(reply.elements.size(), 3u);
  EXPECT_EQ(reply.at(0).AsInt(), 7);
  ASSERT_EQ(reply.at(1).elements.size(), 2u);
  EXPECT_EQ(reply.at(1).at(0).str, "ab");
  EXPECT_EQ(reply.at(1).at(1).type, store::redis::Reply::Type::kNil);
  EXPECT_TRUE(reply.at(2).IsError("ERR"));
  ASSERT_EQ(reader.Next(reply), store::redis::ReplyReader::Result::kReply);
  EXPECT_EQ(reply.type, store::redis::Reply::Type::kStatus);
  EXPECT_EQ(reply.str, "OK");
  EXPECT_EQ(reader.Next(reply), store::redis::ReplyReader::Result::kNeedMore);

  // Not RESP: refused with a reason.
  ASSERT_TRUE(reader.Feed("?what\r\n"));
  EXPECT_EQ(reader.Next(reply), store::redis::ReplyReader::Result::kError);
  EXPECT_FALSE(reader.error().empty());
}

// http_request: a 404 echoed the decoded path, and "%EC" decodes to a byte that is not UTF-8:
// the answer was not JSON.
TEST(FuzzRegressionTest, NotFoundEchoesThePathAsSent) {
  http::Router router("");
  router.Add(http::verb::post, "/v1/rooms/{room}/check",
             [](const http::Request&, http::Respond respond) { respond({}); });
  http::Request request;
  request.method = http::verb::post;
  request.target = "/v1/rooms/r/c%eck";
  std::optional<http::Response> answer;
  router.Dispatch(request, [&](http::Response r) { answer = std::move(r); });
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 404u);
  boost::system::error_code ec;
  boost::json::value body = boost::json::parse(answer->body, ec);
  ASSERT_FALSE(ec) << answer->body;
  EXPECT_EQ(body.at("error").at("message").as_string(), "no such route: /v1/rooms/r/c%eck");
}

// webhook_inputs: Boost.URL 1.81 parses "https://hooks.example.c:484om3/anteroom?x=1" as port 484
// and the path "om3/anteroom", a request target without its '/' (common/uri_shape.h).
TEST(FuzzRegressionTest, APortRunningIntoThePathIsNoWebhookUrl) {
  std::string error;
  EXPECT_FALSE(webhook::ParseWebhookUrl("https://hooks.example.c:484om3/anteroom?x=1", error));
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(webhook::ParseWebhookUrl("https://hooks.example.c:484/anteroom?x=1", error));
}

}  // namespace
}  // namespace anteroom
