// Inputs the fuzzers (fuzz/, scripts/fuzz.sh) found to crash or misbehave, each kept here with
// what it must do now. The same inputs are in the fuzz targets' seed corpora.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/bytes.h"
#include "common/clock.h"
#include "core/room_types.h"
#include "store/memory/memory_backend.h"

namespace anteroom {
namespace {

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// log_records: a check-in record whose session length runs past the record. Replay applied
// it before noticing (an empty session from a null view: undefined behaviour in memcpy, and a
// change made from a record it then called damaged).
TEST(FuzzRegressionTest, ReplayAppliesNothingFromARecordThatDoesNotDecode) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  // kPutRoom2 "r" (capacity 2, target_url "/shop"), then kCheck whose session length (10,551,299)
  // runs past its end.
  ASSERT_TRUE(backend
                  .Replay(Unhex("07a8577d10a2010000010000007201020000000000000001e8030000000000"
                                "00018813000000000000010160ea00000000000001015802000000000000"
                                "000101050000002f73686f70"))
                  .ok());
  auto r = backend.Replay(Unhex("03b5577d10a201000001000000720300a10000616e"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().sessions, 0u) << "nothing applied";

  // A whole check-in followed by stray bytes is damage too, and changes nothing either.
  r =
      backend.Replay(Unhex("03b5577d10a2010000010000007203000000616e6e"
                           "ff"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().sessions, 0u);
  // Nor does a queue record cut short create its queue.
  r = backend.Replay(Unhex("10b5577d10a2010000010000007105000000"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(backend.Summarize().queues, 0u);

  // The whole record still applies.
  r = backend.Replay(Unhex("03b5577d10a2010000010000007203000000616e6e"));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(backend.Summarize().sessions, 1u);
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

}  // namespace
}  // namespace anteroom
