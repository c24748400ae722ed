// Unit tests of the embedded backend's files and recovery: snapshot files, the data directory
// (names, listing, lock, secret), Recover() on clean, torn, damaged and incomplete directories,
// and EmbeddedStore runs (with Compact()) recovered into a fresh memory backend.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/op_status.h"
#include "scratch_dir.h"
#include "store/log/data_dir.h"
#include "store/log/embedded_store.h"
#include "store/log/file_io.h"
#include "store/log/record_format.h"
#include "store/log/snapshot_file.h"
#include "store/memory/change_record.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store::log {
namespace {

using namespace std::chrono_literals;

class ScratchDir : public anteroom::testing::ScratchDir {
 public:
  ScratchDir() : anteroom::testing::ScratchDir("anteroom-recovery-test") {}
};

std::string ReadAll(const std::string& path) {
  std::string data;
  int error = 0;
  EXPECT_TRUE(ReadFile(path, data, error)) << path << ": " << ErrnoText(error);
  return data;
}

void WriteAllTo(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  size_t written = 0;
  EXPECT_EQ(WriteAll(fd, data, written), 0) << path;
  ::close(fd);
}

void FlipByte(const std::string& path, size_t at) {
  std::string data = ReadAll(path);
  ASSERT_LT(at, data.size());
  data[at] = static_cast<char>(data[at] ^ 0x40);
  WriteAllTo(path, data);
}

uint64_t FileSize(const std::string& path) { return std::filesystem::file_size(path); }

// The records of a log segment, and where each starts.
struct Records {
  ScanResult scan;
  std::vector<std::string> payloads;
  std::vector<size_t> offsets;
};

Records ScanSegment(const std::string& path) {
  Records r;
  std::string data = ReadAll(path);
  r.scan = Scan(data, FileKind::kLog, [&](std::string_view payload, size_t offset, std::string&) {
    r.payloads.emplace_back(payload);
    r.offsets.push_back(offset);
    return true;
  });
  return r;
}

std::string RawStateOf(const MemoryBackend& backend) {
  std::string bytes;
  ByteWriter out(bytes);
  backend.SaveState(out);
  return bytes;
}

// The state as a restart would leave it: check-ins that only refresh presence are not logged,
// so a recovered room knows less about when sessions were last seen than the live one did; a
// restart counts everyone present as seen then. Compared that way, at each room's own time (a
// clock at 0 moves no room forward), live and recovered states must be equal to the byte.
std::string StateOf(const MemoryBackend& backend) {
  std::string raw = RawStateOf(backend);
  FakeClock at_zero(0);
  MemoryBackend restarted(at_zero, MemoryBackendOptions{.run_timer = false});
  restarted.StartReplay();
  ByteReader in(raw);
  EXPECT_TRUE(restarted.LoadState(in));
  restarted.FinishRecovery();
  return RawStateOf(restarted);
}

// Calls a callback API and waits (bounded) for its single answer, which may come from the
// journal's thread.
template <typename T, typename Call>
OpResult<T> Await(Call&& call) {
  auto promise = std::make_shared<std::promise<OpResult<T>>>();
  auto future = promise->get_future();
  call([promise](OpResult<T> r) { promise->set_value(std::move(r)); });
  if (future.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "the backend did not answer";
    return OpResult<T>(OpStatus::kInternal, "timeout");
  }
  return future.get();
}

core::JobSpec Job(std::string payload, int32_t priority = 0, int64_t delay_ms = 0,
                  std::optional<std::string> dedupe_key = std::nullopt) {
  core::JobSpec spec;
  spec.payload = std::move(payload);
  spec.priority = priority;
  spec.delay_ms = delay_ms;
  spec.dedupe_key = std::move(dedupe_key);
  return spec;
}

// A memory backend with a clock the test controls, and calls that must succeed.
class Engine {
 public:
  Engine() : backend_(clock_, MemoryBackendOptions{.run_timer = false}) {}

  MemoryBackend& backend() { return backend_; }
  FakeClock& clock() { return clock_; }

  void PutRoom(const std::string& room, int64_t capacity) {
    core::RoomPatch patch;
    patch.capacity = capacity;
    patch.grace_ms = 5'000;
    patch.checkin_timeout_ms = 60'000;
    patch.idle_timeout_ms = std::optional<int64_t>(600'000);
    auto r = Await<core::RoomInfo>([&](auto done) { backend_.PutRoom(room, patch, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  void Configure(const std::string& room, const core::RoomPatch& patch) {
    auto r = Await<core::RoomInfo>([&](auto done) { backend_.PutRoom(room, patch, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  core::SessionView Check(const std::string& room, const std::string& session) {
    auto r = Await<core::SessionView>([&](auto done) { backend_.Check(room, session, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::SessionView{};
  }
  void Leave(const std::string& room, const std::string& session) {
    auto r = Await<core::SessionView>(
        [&](auto done) { backend_.Leave(room, session, /*final=*/true, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  void DeleteRoom(const std::string& room) {
    auto r = Await<core::RoomInfo>([&](auto done) { backend_.DeleteRoom(room, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  OpResult<core::RoomInfo> GetRoom(const std::string& room) {
    return Await<core::RoomInfo>([&](auto done) { backend_.GetRoom(room, done); });
  }
  std::vector<core::PushResult> Push(const std::string& queue, std::vector<core::JobSpec> jobs) {
    auto r = Await<std::vector<core::PushResult>>(
        [&](auto done) { backend_.Push(queue, std::move(jobs), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<core::PushResult>{};
  }
  std::vector<core::Delivery> Fetch(const std::string& queue, const std::string& worker,
                                    size_t max) {
    core::FetchRequest request{.worker = worker,
                               .max = max,
                               .lease_ms = 60'000,
                               .wait_ms = 0,
                               .ack = {},
                               .ack_results = {},
                               .hangup = {}};
    auto r = Await<core::FetchAnswer>(
        [&](auto done) { backend_.Fetch(queue, std::move(request), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? r->jobs : std::vector<core::Delivery>{};
  }
  std::vector<core::LeaseOutcome> Ack(const std::string& queue, std::vector<std::string> leases) {
    auto r = Await<std::vector<core::LeaseOutcome>>(
        [&](auto done) { backend_.Ack(queue, std::move(leases), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<core::LeaseOutcome>{};
  }
  std::vector<core::LeaseOutcome> Nack(const std::string& queue, std::vector<std::string> leases) {
    auto r = Await<std::vector<core::LeaseOutcome>>(
        [&](auto done) { backend_.Nack(queue, std::move(leases), int64_t{1'000}, "boom", done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<core::LeaseOutcome>{};
  }
  void Heartbeat(const std::string& queue, const std::string& worker) {
    auto r = Await<Done>([&](auto done) { backend_.Heartbeat(queue, worker, 120'000, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  void SetPaused(const std::string& queue, bool paused) {
    auto r = Await<Done>([&](auto done) { backend_.SetPaused(queue, paused, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  void Cancel(const std::string& queue, core::JobId id) {
    auto r = Await<core::CancelOutcome>([&](auto done) { backend_.Cancel(queue, id, done); });
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(*r, core::CancelOutcome::kCancelled);
  }
  core::QueueStats GetQueue(const std::string& queue) {
    auto r = Await<core::QueueStats>([&](auto done) { backend_.GetQueue(queue, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::QueueStats{.pushed = -1};
  }
  void SetQueueKey(const std::string& queue, std::optional<std::string> digest) {
    auto r = Await<Done>([&](auto done) { backend_.SetQueueKey(queue, std::move(digest), done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  std::optional<std::string> GetQueueKey(const std::string& queue) {
    auto r =
        Await<std::optional<std::string>>([&](auto done) { backend_.GetQueueKey(queue, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::optional<std::string>("(failed)");
  }

 private:
  FakeClock clock_;
  MemoryBackend backend_;
};

// What a workload leaves for the test to check after recovery.
struct Workload {
  std::string inflight_lease;  // a delivery of "emails" still in flight (worker w1)
};

// Rooms, sessions, queues and jobs, with time passing between the changes.
Workload RunRoomsAndQueues(Engine& e, const std::string& tag = "") {
  Workload w;
  e.PutRoom("lobby" + tag, 2);
  for (const char* s : {"s1", "s2", "s3", "s4"}) {
    e.Check("lobby" + tag, s);
    e.clock().Advance(10);
  }
  e.Leave("lobby" + tag, "s1");
  e.Check("lobby" + tag, "s3");  // admitted into the freed slot
  e.PutRoom("temp" + tag, 1);
  e.Check("temp" + tag, "x");
  e.DeleteRoom("temp" + tag);
  e.clock().Advance(100);

  auto pushed = e.Push("emails" + tag, {Job("hello", 5), Job("world", 1), Job("later", 0, 30'000),
                                        Job("once", 0, 0, "key-1"), Job("low", -3)});
  EXPECT_EQ(pushed.size(), 5u);
  auto again = e.Push("emails" + tag, {Job("once again", 0, 0, "key-1")});  // a dedupe hit
  EXPECT_EQ(again.size(), 1u);
  if (!again.empty()) {
    EXPECT_FALSE(again[0].created);
  }
  auto reports = e.Push("reports" + tag, {Job("r1"), Job("r2")});
  e.clock().Advance(20);
  auto jobs = e.Fetch("emails" + tag, "w1", 3);
  EXPECT_EQ(jobs.size(), 3u);
  if (jobs.size() == 3) {
    EXPECT_EQ(e.Ack("emails" + tag, {jobs[0].lease}),
              std::vector<core::LeaseOutcome>{core::LeaseOutcome::kOk});
    EXPECT_EQ(e.Nack("emails" + tag, {jobs[1].lease}),
              std::vector<core::LeaseOutcome>{core::LeaseOutcome::kOk});
    w.inflight_lease = jobs[2].lease;
  }
  e.Heartbeat("emails" + tag, "w2");
  e.SetPaused("reports" + tag, true);
  if (reports.size() == 2) e.Cancel("reports" + tag, reports[1].id);
  e.clock().Advance(5);
  return w;
}

EmbeddedOptions Options(const std::string& dir, FsyncPolicy fsync = FsyncPolicy::kAlways) {
  return EmbeddedOptions{
      .dir = dir, .fsync = fsync, .compact_min_bytes = 64ull << 20, .compact_in_background = false};
}

// Recovers `dir` into a fresh backend; throws as Recover does.
struct Recovered {
  std::unique_ptr<Engine> engine = std::make_unique<Engine>();
  RecoveryReport report;
  uint64_t next = 0;
};

Recovered RecoverInto(const std::string& dir, bool repair) {
  Recovered r;
  r.next = Recover(dir, r.engine->backend(), repair, r.report);
  return r;
}

// The message of the runtime_error Recover throws ("" if it does not).
std::string RecoverError(const std::string& dir, bool repair = true) {
  try {
    RecoverInto(dir, repair);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// ---- snapshot files ------------------------------------------------------------------------

// About 3 MiB of fields, so the snapshot spans several ~1 MiB records.
void SaveLarge(ByteWriter& out) {
  out.Put<uint32_t>(0xfeedbeef);
  for (int i = 0; i < 3000; ++i) {
    out.Put<uint64_t>(static_cast<uint64_t>(i) * 7919);
    out.PutString(std::string(1000, static_cast<char>('a' + i % 26)));
  }
  out.PutBool(true);
}

std::string LargeState() {
  std::string bytes;
  ByteWriter out(bytes);
  SaveLarge(out);
  return bytes;
}

TEST(LogSnapshotFileTest, RoundTripOfALargeState) {
  ScratchDir dir;
  std::string path = dir / SnapshotName(7);
  ASSERT_EQ(WriteSnapshotFile(path, 7, SaveLarge), 0);
  std::string state, error;
  ASSERT_TRUE(ReadSnapshotFile(path, 7, state, error)) << error;
  EXPECT_EQ(error, "");
  EXPECT_EQ(state, LargeState());
  // Framed as several records plus the end record, all clean.
  size_t records = 0;
  ScanResult scan = Scan(ReadAll(path), FileKind::kSnapshot,
                         [&](std::string_view, size_t, std::string&) { return ++records, true; });
  EXPECT_EQ(scan.end, ScanResult::End::kClean) << scan.problem;
  EXPECT_EQ(scan.sequence, 7u);
  EXPECT_GE(records, 4u);
}

TEST(LogSnapshotFileTest, BytesPassedOnInPiecesAreFramedAsTheFieldsWere) {
  ScratchDir dir;
  const std::string state = LargeState();
  std::string path = dir / SnapshotName(8);
  ASSERT_EQ(WriteSnapshotFile(path, 8, [&](ByteWriter& out) { out.PutBytes(state); }), 0);
  std::string read, error;
  ASSERT_TRUE(ReadSnapshotFile(path, 8, read, error)) << error;
  EXPECT_EQ(read, state);
  size_t records = 0;
  Scan(ReadAll(path), FileKind::kSnapshot,
       [&](std::string_view, size_t, std::string&) { return ++records, true; });
  EXPECT_GE(records, 4u);  // spilled in ~1 MiB records, not as one 3 MiB record
}

TEST(LogSnapshotFileTest, RoundTripOfSmallAndEmptyStates) {
  ScratchDir dir;
  std::string path = dir / "small.snap";
  ASSERT_EQ(WriteSnapshotFile(path, 1, [](ByteWriter& out) { out.PutString("tiny"); }), 0);
  std::string state, error;
  ASSERT_TRUE(ReadSnapshotFile(path, 1, state, error)) << error;
  EXPECT_EQ(state, std::string("\x04\0\0\0tiny", 8));

  std::string empty_path = dir / "empty.snap";
  ASSERT_EQ(WriteSnapshotFile(empty_path, 2, [](ByteWriter&) {}), 0);
  state = "stale";
  ASSERT_TRUE(ReadSnapshotFile(empty_path, 2, state, error)) << error;
  EXPECT_EQ(state, "");
}

TEST(LogSnapshotFileTest, WrongNumberIsRefused) {
  ScratchDir dir;
  std::string path = dir / SnapshotName(3);
  ASSERT_EQ(WriteSnapshotFile(path, 3, SaveLarge), 0);
  std::string state, error;
  EXPECT_FALSE(ReadSnapshotFile(path, 4, state, error));
  EXPECT_TRUE(Contains(error, "offset 16: snapshot number 3")) << error;
}

TEST(LogSnapshotFileTest, TruncatedSnapshotIsRefusedWithAnOffset) {
  ScratchDir dir;
  std::string path = dir / SnapshotName(1);
  ASSERT_EQ(WriteSnapshotFile(path, 1, SaveLarge), 0);
  const std::string whole = ReadAll(path);
  std::vector<size_t> offsets;
  (void)Scan(whole, FileKind::kSnapshot, [&](std::string_view, size_t offset, std::string&) {
    offsets.push_back(offset);
    return true;
  });
  ASSERT_GE(offsets.size(), 3u);
  const size_t end_record = offsets.back();
  std::string cut_path = dir / "cut.snap";
  for (size_t len : {whole.size() - 1, end_record + 3, end_record, offsets[1] + 100,
                     kFileHeaderBytes, size_t{10}}) {
    WriteAllTo(cut_path, std::string_view(whole).substr(0, len));
    std::string state, error;
    EXPECT_FALSE(ReadSnapshotFile(cut_path, 1, state, error)) << "cut at " << len;
    EXPECT_TRUE(Contains(error, "offset ")) << "cut at " << len << ": " << error;
  }
  // Cut exactly before the end record: every record is whole, but the end is missing.
  WriteAllTo(cut_path, std::string_view(whole).substr(0, end_record));
  std::string state, error;
  EXPECT_FALSE(ReadSnapshotFile(cut_path, 1, state, error));
  EXPECT_EQ(error, "offset " + std::to_string(end_record) +
                       ": the snapshot is incomplete (no end record)");
  // Cut inside a chunk: the offset of that chunk.
  WriteAllTo(cut_path, std::string_view(whole).substr(0, offsets[1] + 100));
  EXPECT_FALSE(ReadSnapshotFile(cut_path, 1, state, error));
  EXPECT_TRUE(Contains(error, "offset " + std::to_string(offsets[1]) + ": incomplete record"))
      << error;
}

TEST(LogSnapshotFileTest, FlippedByteIsRefusedWithItsRecordOffset) {
  ScratchDir dir;
  std::string path = dir / SnapshotName(1);
  ASSERT_EQ(WriteSnapshotFile(path, 1, SaveLarge), 0);
  const std::string whole = ReadAll(path);
  std::vector<size_t> offsets;
  (void)Scan(whole, FileKind::kSnapshot, [&](std::string_view, size_t offset, std::string&) {
    offsets.push_back(offset);
    return true;
  });
  ASSERT_GE(offsets.size(), 3u);
  struct Case {
    size_t at;
    std::string expected_prefix;
  };
  const Case cases[] = {
      {5, "offset 0: "},                                         // the file header
      {offsets[0] + 500, "offset 32: record payload checksum"},  // the first chunk
      {offsets[1] + 2, "offset " + std::to_string(offsets[1]) + ": record header checksum"},
      {whole.size() - 1, "offset " + std::to_string(offsets.back()) + ": "},  // the end record
  };
  for (const Case& c : cases) {
    std::string bad = whole;
    bad[c.at] = static_cast<char>(bad[c.at] ^ 0x01);
    WriteAllTo(path, bad);
    std::string state, error;
    EXPECT_FALSE(ReadSnapshotFile(path, 1, state, error)) << "byte " << c.at;
    EXPECT_EQ(error.substr(0, c.expected_prefix.size()), c.expected_prefix)
        << "byte " << c.at << ": " << error;
  }
}

TEST(LogSnapshotFileTest, DataAfterTheEndRecordIsRefused) {
  ScratchDir dir;
  std::string path = dir / SnapshotName(1);
  ASSERT_EQ(WriteSnapshotFile(path, 1, [](ByteWriter& out) { out.PutString("state"); }), 0);
  std::string data = ReadAll(path);
  const size_t extra_at = data.size();
  AppendRecord(data, "more state");
  WriteAllTo(path, data);
  std::string state, error;
  EXPECT_FALSE(ReadSnapshotFile(path, 1, state, error));
  EXPECT_EQ(error, "offset " + std::to_string(extra_at) + ": data after the end record");
}

// A state whose bytes spell an end record (the marker and a size) is still state: only the last
// record ends a snapshot. (The log_records fuzzer found such a state refused.)
TEST(LogSnapshotFileTest, StateThatLooksLikeTheEndRecordReadsBack) {
  ScratchDir dir;
  std::string path = dir / SnapshotName(1);
  std::string looks_like_end = "anteroom-snapshot-end";
  looks_like_end.append(8, '\0');
  ASSERT_EQ(WriteSnapshotFile(path, 1, [&](ByteWriter& out) { out.PutBytes(looks_like_end); }), 0);
  std::string state, error;
  ASSERT_TRUE(ReadSnapshotFile(path, 1, state, error)) << error;
  EXPECT_EQ(state, looks_like_end);
}

TEST(LogSnapshotFileTest, MissingFileIsAnIoError) {
  ScratchDir dir;
  std::string state, error;
  EXPECT_FALSE(ReadSnapshotFile(dir / SnapshotName(1), 1, state, error));
  EXPECT_TRUE(Contains(error, "No such file")) << error;
}

// ---- the data directory --------------------------------------------------------------------

TEST(LogDataDirTest, NamesAreZeroPaddedTo16Digits) {
  EXPECT_EQ(SegmentName(1), "log-0000000000000001.log");
  EXPECT_EQ(SegmentName(1234567890123456ull), "log-1234567890123456.log");
  EXPECT_EQ(SnapshotName(12), "snap-0000000000000012.snap");
}

// Without a `format` mark the files' headers say the format: a log of an older one is refused
// (one line: what it is, what to do), before any record is read, and nothing is changed; a
// directory of this format gets its mark.
TEST(LogDataDirTest, AnUnmarkedDirectoryOfAnOlderFormatIsRefused) {
  ScratchDir dir;
  std::string old = FileHeader(FileKind::kLog, 1, /*version=*/2);
  AppendRecord(old, "a record of format 2");
  WriteAllTo(dir / SegmentName(1), old);
  std::string error = RecoverError(dir.path());
  EXPECT_EQ(error, "data directory " + dir.path() +
                       " is in data format 2, written by an older anteroom; this build reads "
                       "formats 4 to " +
                       std::to_string(kFormatVersion) +
                       ": run the anteroom that wrote it, or start this one on an empty directory");
  EXPECT_EQ(ReadAll(dir / SegmentName(1)), old);
  EXPECT_FALSE(std::filesystem::exists(dir / "format"));

  ScratchDir fresh;
  RecoverInto(fresh.path(), /*repair=*/false);
  EXPECT_FALSE(std::filesystem::exists(fresh / "format")) << "check-data writes nothing";
  RecoverInto(fresh.path(), /*repair=*/true);
  EXPECT_EQ(ReadAll(fresh / "format"), std::to_string(kFormatVersion) + "\n");
  WriteAllTo(fresh / "format", "3 \n");
  EXPECT_TRUE(Contains(RecoverError(fresh.path()), "not a data format mark"));
}

// A directory of format 4 (the oldest this build reads) is read; a start that writes marks it
// with this build's format first, a check (no repair) leaves it as it was.
TEST(LogDataDirTest, AnOlderReadableFormatIsReadAndMarkedBeforeWriting) {
  ScratchDir dir;
  WriteAllTo(dir / SegmentName(1), FileHeader(FileKind::kLog, 1, kOldestReadableFormat));
  WriteAllTo(dir / "format", std::to_string(kOldestReadableFormat) + "\n");
  EXPECT_EQ(RecoverError(dir.path(), /*repair=*/false), "");
  EXPECT_EQ(ReadAll(dir / "format"), std::to_string(kOldestReadableFormat) + "\n");
  EXPECT_EQ(RecoverError(dir.path(), /*repair=*/true), "");
  EXPECT_EQ(ReadAll(dir / "format"), std::to_string(kFormatVersion) + "\n");
  EXPECT_EQ(RecoverError(dir.path(), /*repair=*/true), "");

  ScratchDir unmarked;
  WriteAllTo(unmarked / SegmentName(1), FileHeader(FileKind::kLog, 1, kOldestReadableFormat));
  EXPECT_EQ(RecoverError(unmarked.path(), /*repair=*/true), "");
  EXPECT_EQ(ReadAll(unmarked / "format"), std::to_string(kFormatVersion) + "\n");
}

TEST(LogDataDirTest, ListDirParsesNamesAndIgnoresOthers) {
  ScratchDir dir;
  for (const char* name :
       {"log-0000000000000010.log", "log-0000000000000002.log", "log-0000000000000001.log",
        "snap-0000000000000003.snap", "snap-0000000000000012.snap",
        "snap-0000000000000005.snap.tmp", "other.tmp", "LOCK", "secret", "log-1.log",
        "log-000000000000000x.log", "log-00000000000000001.log", "log-0000000000000004.snap",
        "snap-0000000000000004.snapx", "xlog-0000000000000006.log", ".tmp"}) {
    WriteAllTo(dir / name, "x");
  }
  std::filesystem::create_directory(dir / "log-0000000000000099.logdir");
  DirListing l = ListDir(dir.path());
  EXPECT_EQ(l.segments, (std::vector<uint64_t>{1, 2, 10}));
  EXPECT_EQ(l.snapshots, (std::vector<uint64_t>{3, 12}));
  std::vector<std::string> tmps = l.temporaries;
  std::sort(tmps.begin(), tmps.end());
  EXPECT_EQ(tmps, (std::vector<std::string>{"other.tmp", "snap-0000000000000005.snap.tmp"}));
}

TEST(LogDataDirTest, SecondLockOnTheSameDirectoryThrows) {
  ScratchDir dir;
  const std::string data = dir / "data";  // created by the lock
  {
    DirLock first(data);
    EXPECT_TRUE(std::filesystem::is_directory(data));
    EXPECT_EQ(ReadAll(data + "/LOCK"), std::to_string(::getpid()) + "\n");
    try {
      DirLock second(data);
      FAIL() << "a second lock was granted";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(Contains(e.what(), "locked by another process")) << e.what();
      EXPECT_TRUE(Contains(e.what(), "pid " + std::to_string(::getpid()))) << e.what();
    }
    // So is a whole store on it.
    Engine e;
    try {
      EmbeddedStore store(e.backend(), Options(data));
      FAIL() << "a store opened a locked directory";
    } catch (const std::runtime_error& ex) {
      EXPECT_TRUE(Contains(ex.what(), "locked by another process")) << ex.what();
    }
  }
  // Released with its holder.
  EXPECT_NO_THROW(DirLock again(data));
}

TEST(LogDataDirTest, SecretIsStableAndPrivate) {
  ScratchDir dir;
  std::string secret = LoadOrCreateSecret(dir.path());
  EXPECT_EQ(secret.size(), 32u);
  struct stat st;
  ASSERT_EQ(::stat((dir / "secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(LoadOrCreateSecret(dir.path()), secret);
  EXPECT_FALSE(std::filesystem::exists(dir / "secret.tmp"));
  ScratchDir other;
  EXPECT_NE(LoadOrCreateSecret(other.path()), secret);
}

// ---- Recover -------------------------------------------------------------------------------

TEST(LogRecoveryTest, EmptyDirectoryRecoversNothing) {
  ScratchDir dir;
  Recovered r = RecoverInto(dir.path(), true);
  EXPECT_EQ(r.next, 1u);
  EXPECT_EQ(r.report.snapshot, 0u);
  EXPECT_TRUE(r.report.segments.empty());
  EXPECT_EQ(r.report.records, 0u);
  EXPECT_TRUE(r.report.warnings.empty());
  MemoryBackend::Summary s = r.engine->backend().Summarize();
  EXPECT_EQ(s.rooms + s.sessions + s.queues + s.jobs, 0u);
  Engine fresh;
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(fresh.backend()));
}

class LogStoreRecoveryTest : public ::testing::Test {
 protected:
  // Runs the workload in a store on dir_, stops it, and keeps the backend's final state.
  Workload RunStore(FsyncPolicy fsync = FsyncPolicy::kAlways) {
    Workload w;
    {
      EmbeddedStore store(original_.backend(), Options(dir_.path(), fsync));
      w = RunRoomsAndQueues(original_);
    }
    state_ = StateOf(original_.backend());
    return w;
  }
  std::string Segment(uint64_t n) const { return dir_ / SegmentName(n); }

  ScratchDir dir_;
  Engine original_;
  std::string state_;
};

TEST_F(LogStoreRecoveryTest, StoreRunRecoversTheSameState) {
  Workload w = RunStore();
  Records log = ScanSegment(Segment(1));
  ASSERT_EQ(log.scan.end, ScanResult::End::kClean) << log.scan.problem;
  ASSERT_GT(log.payloads.size(), 10u);

  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.next, 2u);
  EXPECT_EQ(r.report.snapshot, 0u);
  EXPECT_EQ(r.report.segments, (std::vector<uint64_t>{1}));
  EXPECT_EQ(r.report.records, log.payloads.size());
  EXPECT_EQ(r.report.log_bytes, FileSize(Segment(1)));
  EXPECT_TRUE(r.report.warnings.empty());
  EXPECT_EQ(StateOf(r.engine->backend()), state_);

  MemoryBackend::Summary a = original_.backend().Summarize();
  MemoryBackend::Summary b = r.engine->backend().Summarize();
  EXPECT_EQ(b.rooms, a.rooms);
  EXPECT_EQ(b.sessions, a.sessions);
  EXPECT_EQ(b.queues, a.queues);
  EXPECT_EQ(b.jobs, a.jobs);
  EXPECT_EQ(b.rooms, 1u);   // lobby (temp was deleted)
  EXPECT_EQ(b.queues, 2u);  // emails, reports

  Engine& e = *r.engine;
  auto lobby = e.GetRoom("lobby");
  ASSERT_TRUE(lobby.ok()) << lobby.message();
  EXPECT_EQ(lobby->config.capacity, 2);
  EXPECT_EQ(lobby->active, 2);
  EXPECT_EQ(lobby->waiting, 1);
  EXPECT_EQ(e.GetRoom("temp").status(), OpStatus::kUnknownRoom);
  core::QueueStats emails = e.GetQueue("emails");
  EXPECT_EQ(emails.pushed, 5);
  EXPECT_EQ(emails.acked, 1);
  EXPECT_EQ(emails.nacked, 1);
  EXPECT_EQ(emails.inflight, 1);
  core::QueueStats reports = e.GetQueue("reports");
  EXPECT_TRUE(reports.paused);
  EXPECT_EQ(reports.cancelled, 1);
  EXPECT_EQ(reports.ready, 1);
  // The lease handed out before the restart is still the current one.
  EXPECT_EQ(e.Ack("emails", {w.inflight_lease}),
            std::vector<core::LeaseOutcome>{core::LeaseOutcome::kOk});
}

TEST_F(LogStoreRecoveryTest, EveryFsyncPolicyRecoversTheSameState) {
  for (FsyncPolicy policy : {FsyncPolicy::kEverySec, FsyncPolicy::kNo}) {
    SCOPED_TRACE(ToString(policy));
    ScratchDir dir;
    Engine original;
    {
      EmbeddedStore store(original.backend(), Options(dir.path(), policy));
      RunRoomsAndQueues(original);
    }
    Recovered r = RecoverInto(dir.path(), true);
    EXPECT_TRUE(r.report.warnings.empty());
    EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original.backend()));
  }
}

// Check-ins that only say "still here" are not logged; the drop-out of a session that stopped
// checking in is. A restart keeps everyone else, seen at restart time.
TEST_F(LogStoreRecoveryTest, ARestartCountsEveryonePresentAsSeenThen) {
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    original_.PutRoom("lobby", 1);  // check-in timeout 60 s, idle timeout 600 s
    for (const char* s : {"a", "b", "c"}) original_.Check("lobby", s);
    for (int i = 0; i < 100; ++i) {  // a and b check in every second, c stopped at once
      original_.clock().Advance(1'000);
      original_.Check("lobby", "a");
      original_.Check("lobby", "b");
    }
    EXPECT_EQ(original_.GetRoom("lobby")->waiting, 1) << "c dropped out";
  }
  Records log = ScanSegment(Segment(1));
  EXPECT_EQ(log.payloads.size(), 5u) << "the room, 3 joins, c's drop-out: no check-in";

  Engine second;
  second.clock().Set(original_.clock().NowMs() + 3'600'000);  // down for an hour
  EmbeddedStore store(second.backend(), Options(dir_.path()));
  auto lobby = second.GetRoom("lobby");
  ASSERT_TRUE(lobby.ok()) << lobby.message();
  EXPECT_EQ(lobby->active, 1);
  EXPECT_EQ(lobby->waiting, 1) << "b kept its place: its last logged check-in is 100 s older";
  second.clock().Advance(59'999);
  EXPECT_EQ(second.GetRoom("lobby")->waiting, 1);
  second.clock().Advance(1);
  EXPECT_EQ(second.GetRoom("lobby")->waiting, 0)
      << "b drops out a check-in timeout after the restart";
  EXPECT_EQ(second.GetRoom("lobby")->active, 1) << "a's idle timeout also restarted";
}

TEST_F(LogStoreRecoveryTest, RestartedStoreContinuesInANewSegment) {
  RunStore();
  Engine second;
  {
    EmbeddedStore store(second.backend(), Options(dir_.path()));
    EXPECT_EQ(store.recovery().segments, (std::vector<uint64_t>{1}));
    EXPECT_EQ(StateOf(second.backend()), state_);
    EXPECT_EQ(store.journal().CurrentSegment(), 2u);
    RunRoomsAndQueues(second, "-2");
  }
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.segments, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(r.next, 3u);
  EXPECT_TRUE(r.report.warnings.empty());
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(second.backend()));
  EXPECT_EQ(r.engine->backend().Summarize().rooms, 2u);
}

TEST_F(LogStoreRecoveryTest, TornTailIsTruncatedWithAWarning) {
  RunStore();
  const std::string seg = Segment(1);
  Records log = ScanSegment(seg);
  ASSERT_EQ(log.scan.end, ScanResult::End::kClean);
  ASSERT_GE(log.payloads.size(), 2u);
  const uint64_t size = FileSize(seg);
  std::filesystem::resize_file(seg, size - 3);
  const std::string torn = ReadAll(seg);

  // What the log holds without its last record, replayed directly.
  Engine expected;
  for (size_t i = 0; i + 1 < log.payloads.size(); ++i) {
    OpResult<Done> applied = expected.backend().Replay(log.payloads[i]);
    ASSERT_TRUE(applied.ok()) << applied.message();
  }

  // Without repair: recovered, warned about, the file untouched.
  Recovered check = RecoverInto(dir_.path(), false);
  EXPECT_EQ(check.report.records, log.payloads.size() - 1);
  ASSERT_EQ(check.report.warnings.size(), 1u);
  EXPECT_TRUE(
      Contains(check.report.warnings[0],
               SegmentName(1) + ": offset " + std::to_string(log.offsets.back()) + ": torn tail"))
      << check.report.warnings[0];
  EXPECT_TRUE(Contains(check.report.warnings[0], "would be truncated")) << check.report.warnings[0];
  EXPECT_EQ(ReadAll(seg), torn);
  EXPECT_EQ(StateOf(check.engine->backend()), StateOf(expected.backend()));

  // With repair: truncated to the end of the last whole record.
  Recovered fixed = RecoverInto(dir_.path(), true);
  EXPECT_EQ(fixed.report.records, log.payloads.size() - 1);
  ASSERT_EQ(fixed.report.warnings.size(), 1u);
  EXPECT_TRUE(Contains(fixed.report.warnings[0], "torn tail")) << fixed.report.warnings[0];
  EXPECT_TRUE(Contains(fixed.report.warnings[0], "bytes truncated")) << fixed.report.warnings[0];
  EXPECT_EQ(FileSize(seg), log.offsets.back());
  EXPECT_EQ(StateOf(fixed.engine->backend()), StateOf(expected.backend()));

  // Now clean.
  Recovered again = RecoverInto(dir_.path(), true);
  EXPECT_TRUE(again.report.warnings.empty());
  EXPECT_EQ(again.report.records, log.payloads.size() - 1);
  EXPECT_EQ(StateOf(again.engine->backend()), StateOf(expected.backend()));
}

// A crash while a segment was being created (after a restart or a rotation) leaves a file
// shorter than its header. Recovery removes it; the directory must still open afterwards, and
// keep opening after the next run.
TEST_F(LogStoreRecoveryTest, TornHeaderOfTheLastSegmentIsRemovedAndLaterStartsStillRecover) {
  RunStore();
  const std::string header = FileHeader(FileKind::kLog, 2);
  WriteAllTo(Segment(2), std::string_view(header).substr(0, 10));

  Recovered check = RecoverInto(dir_.path(), false);
  ASSERT_EQ(check.report.warnings.size(), 1u);
  EXPECT_TRUE(Contains(check.report.warnings[0], SegmentName(2) + ": offset 0: torn tail"))
      << check.report.warnings[0];
  EXPECT_TRUE(std::filesystem::exists(Segment(2)));
  EXPECT_EQ(StateOf(check.engine->backend()), state_);

  // The restart that finds it, and the one after.
  Engine second;
  {
    EmbeddedStore store(second.backend(), Options(dir_.path()));
    ASSERT_EQ(store.recovery().warnings.size(), 1u);
    EXPECT_EQ(StateOf(second.backend()), state_);
    second.PutRoom("after-restart", 3);
  }
  std::string error = RecoverError(dir_.path());
  EXPECT_EQ(error, "") << "segments on disk: "
                       << ::testing::PrintToString(ListDir(dir_.path()).segments);
  if (error.empty()) {
    Recovered again = RecoverInto(dir_.path(), true);
    EXPECT_EQ(StateOf(again.engine->backend()), StateOf(second.backend()));
  }
}

TEST_F(LogStoreRecoveryTest, TornTailOfAnEarlierSegmentIsDamage) {
  RunStore();
  Engine second;
  {
    EmbeddedStore store(second.backend(), Options(dir_.path()));
    second.PutRoom("another", 3);
  }
  const std::string seg = Segment(1);
  Records log = ScanSegment(seg);
  std::filesystem::resize_file(seg, FileSize(seg) - 3);
  std::string error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, seg + ": offset " + std::to_string(log.offsets.back()) + ": "))
      << error;
  EXPECT_TRUE(Contains(error, "later segments exist")) << error;
}

TEST_F(LogStoreRecoveryTest, FlippedByteInTheMiddleIsDamageNamingFileAndOffset) {
  RunStore();
  const std::string seg = Segment(1);
  Records log = ScanSegment(seg);
  ASSERT_GE(log.payloads.size(), 4u);
  const size_t k = log.payloads.size() / 2;
  const size_t offset = log.offsets[k];
  FlipByte(seg, offset + kRecordHeaderBytes + 1);
  const std::string damaged = ReadAll(seg);

  for (bool repair : {true, false}) {
    std::string error = RecoverError(dir_.path(), repair);
    EXPECT_TRUE(
        Contains(error, "/log-0000000000000001.log: offset " + std::to_string(offset) + ": "))
        << "repair " << repair << ": " << error;
    EXPECT_EQ(error.rfind(seg, 0), 0u) << error;  // starts with the full path
    EXPECT_EQ(ReadAll(seg), damaged) << "recovery changed a damaged file";
  }
  // A store refuses to start on it, too.
  Engine e;
  EXPECT_THROW(EmbeddedStore(e.backend(), Options(dir_.path())), std::runtime_error);
  EXPECT_EQ(ReadAll(seg), damaged);
}

TEST_F(LogStoreRecoveryTest, FlippedLengthInTheMiddleIsDamageNotATornTail) {
  RunStore();
  const std::string seg = Segment(1);
  Records log = ScanSegment(seg);
  ASSERT_GE(log.payloads.size(), 4u);
  const size_t offset = log.offsets[1];
  FlipByte(seg, offset);  // the low byte of the length
  const uint64_t size = FileSize(seg);
  std::string error = RecoverError(dir_.path(), true);
  EXPECT_TRUE(Contains(error, SegmentName(1) + ": offset " + std::to_string(offset) + ": "))
      << error;
  EXPECT_EQ(FileSize(seg), size) << "the damaged log was truncated";
}

TEST_F(LogStoreRecoveryTest, SegmentWithAWrongNumberIsDamage) {
  RunStore();
  std::filesystem::rename(Segment(1), dir_ / SegmentName(2));
  // Segment 2 alone (no snapshot) first reads as a missing snapshot.
  std::string error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, SnapshotName(2) + ": missing")) << error;
  // A segment 1 that says it is 2.
  std::string data = ReadAll(dir_ / SegmentName(2));
  ASSERT_TRUE(std::filesystem::remove(dir_ / SegmentName(2)));
  std::string header = FileHeader(FileKind::kLog, 2);
  data.replace(0, header.size(), header);
  WriteAllTo(Segment(1), data);
  error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, SegmentName(1) + ": offset 16: segment number 2")) << error;
}

TEST_F(LogStoreRecoveryTest, MissingSegmentIsNamed) {
  RunStore();
  Engine second;
  {
    EmbeddedStore store(second.backend(), Options(dir_.path()));
    second.PutRoom("r2", 1);
    {
      std::unique_lock world(second.backend().world());
      EXPECT_EQ(store.journal().Rotate(), 3u);
    }
    second.PutRoom("r3", 1);
  }
  ASSERT_EQ(ListDir(dir_.path()).segments, (std::vector<uint64_t>{1, 2, 3}));
  std::filesystem::remove(Segment(2));
  std::string error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, dir_ / SegmentName(2) + ": missing")) << error;
  // Segment 1 missing: the log then starts at 3 without a snapshot.
  std::filesystem::remove(Segment(1));
  error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, dir_ / SnapshotName(3) + ": missing")) << error;
}

// ---- compaction ----------------------------------------------------------------------------

TEST_F(LogStoreRecoveryTest, CompactThenRecoverGivesTheSameStateAndDropsOldSegments) {
  Workload before, after;
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    before = RunRoomsAndQueues(original_);
    std::string state_at_cut = RawStateOf(original_.backend());
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    EXPECT_EQ(store.compaction_stats().compactions, 1u);
    EXPECT_GT(store.compaction_stats().last_snapshot_bytes, 0u);
    DirListing files = ListDir(dir_.path());
    EXPECT_EQ(files.snapshots, (std::vector<uint64_t>{2}));
    EXPECT_TRUE(files.temporaries.empty());
    EXPECT_FALSE(std::filesystem::exists(Segment(1)));
    EXPECT_EQ(store.journal().CurrentSegment(), 2u);
    // The snapshot holds the state at the cut.
    std::string snap_state, snap_error;
    ASSERT_TRUE(ReadSnapshotFile(dir_ / SnapshotName(2), 2, snap_state, snap_error)) << snap_error;
    EXPECT_EQ(snap_state, state_at_cut);
    // Changes after the cut go to segment 2.
    after = RunRoomsAndQueues(original_, "-after");
    // Those answers were durable, so segment 2 exists by now.
    EXPECT_EQ(ListDir(dir_.path()).segments, (std::vector<uint64_t>{2}));
  }
  state_ = StateOf(original_.backend());

  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 2u);
  EXPECT_GT(r.report.snapshot_bytes, 0u);
  EXPECT_EQ(r.report.segments, (std::vector<uint64_t>{2}));
  EXPECT_GT(r.report.records, 0u);
  EXPECT_EQ(r.next, 3u);
  EXPECT_TRUE(r.report.warnings.empty());
  EXPECT_EQ(StateOf(r.engine->backend()), state_);
  EXPECT_EQ(r.engine->Ack("emails", {before.inflight_lease}),
            std::vector<core::LeaseOutcome>{core::LeaseOutcome::kOk});
  EXPECT_EQ(r.engine->Ack("emails-after", {after.inflight_lease}),
            std::vector<core::LeaseOutcome>{core::LeaseOutcome::kOk});
}

// paused and target_url come back from the log alone, and from a snapshot plus the log.
TEST_F(LogStoreRecoveryTest, RoomSettingsSurviveReplayAndCompaction) {
  auto expect_settings = [](Engine& e, const std::string& room, bool paused,
                            std::optional<std::string> url) {
    auto info = e.GetRoom(room);
    ASSERT_TRUE(info.ok()) << info.message();
    EXPECT_EQ(info->config.paused, paused) << room;
    EXPECT_EQ(info->config.target_url, url) << room;
  };
  core::RoomPatch pause;
  pause.paused = true;
  pause.target_url = std::optional<std::string>("https://shop.example/in");
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    original_.PutRoom("held", 1);
    original_.Configure("held", pause);
    original_.Check("held", "a");  // waits: paused
    original_.PutRoom("cleared", 1);
    original_.Configure("cleared", pause);
    core::RoomPatch resume;
    resume.paused = false;
    resume.target_url = std::optional<std::string>();
    original_.Configure("cleared", resume);
  }
  {
    Recovered r = RecoverInto(dir_.path(), true);
    EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
    expect_settings(*r.engine, "held", true, "https://shop.example/in");
    expect_settings(*r.engine, "cleared", false, std::nullopt);
    EXPECT_EQ(r.engine->Check("held", "a").status, core::SessionStatus::kWaiting);
  }
  Engine second;
  {
    EmbeddedStore store(second.backend(), Options(dir_.path()));
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    core::RoomPatch url;
    url.target_url = std::optional<std::string>("/after-snapshot");
    second.Configure("cleared", url);
  }
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 3u);  // segment 1, the restart's segment 2, the cut at 3
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(second.backend()));
  expect_settings(*r.engine, "held", true, "https://shop.example/in");
  expect_settings(*r.engine, "cleared", false, "/after-snapshot");
}

// A room's gate (kCreateRoom2 and kPutRoom4 records, room format 5) comes back from the log
// alone, and from a snapshot plus the log: set at creation, kept by a change without it,
// replaced, cleared.
TEST_F(LogStoreRecoveryTest, GateSurvivesReplayAndCompaction) {
  const std::string first = R"({"cookie":"pass","bypass":{"paths":["/static/*"]}})";
  const std::string second =
      "{\"hosts\":[\"b\xc3\xbc"
      "cher.example\"]}";
  auto expect_gate = [](Engine& e, const std::string& room, std::optional<std::string> gate) {
    auto info = e.GetRoom(room);
    ASSERT_TRUE(info.ok()) << info.message();
    EXPECT_EQ(info->config.gate, gate) << room;
  };
  auto gate = [](std::optional<std::string> text) {
    core::RoomPatch p;
    p.gate = std::move(text);
    return p;
  };
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    core::RoomPatch create;
    create.capacity = 2;
    create.gate = first;
    original_.Configure("created", create);
    original_.PutRoom("kept", 1);
    original_.Configure("kept", gate(first));
    original_.PutRoom("kept", 3);  // a change without the gate
    original_.PutRoom("replaced", 1);
    original_.Configure("replaced", gate(first));
    original_.Configure("replaced", gate(second));
    original_.PutRoom("cleared", 1);
    original_.Configure("cleared", gate(first));
    original_.Configure("cleared", gate(std::nullopt));
  }
  {
    Recovered r = RecoverInto(dir_.path(), true);
    EXPECT_EQ(r.report.snapshot, 0u);
    EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
    expect_gate(*r.engine, "created", first);
    expect_gate(*r.engine, "kept", first);
    expect_gate(*r.engine, "replaced", second);
    expect_gate(*r.engine, "cleared", std::nullopt);
    auto kept = r.engine->GetRoom("kept");
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ(kept->config.capacity, 3);
  }
  Engine after;
  {
    EmbeddedStore store(after.backend(), Options(dir_.path()));
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    after.Configure("replaced", gate(std::nullopt));  // after the cut: in the log only
    after.Configure("cleared", gate(second));
  }
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 3u);
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(after.backend()));
  expect_gate(*r.engine, "created", first);
  expect_gate(*r.engine, "kept", first);
  expect_gate(*r.engine, "replaced", std::nullopt);
  expect_gate(*r.engine, "cleared", second);
}

// A SHA-256 digest as the server keeps it (32 raw bytes, NULs and high bytes included).
std::string Digest(char fill) {
  std::string d(kQueueKeyDigestBytes, fill);
  d[1] = '\0';
  d[2] = '\xff';
  return d;
}

// Queue keys (kSetQueueKey records, state format 2) come back from the log alone, and from a
// snapshot plus the log; a removed key stays removed, and a name that held only its key is
// forgotten.
TEST_F(LogStoreRecoveryTest, QueueKeysSurviveReplayAndCompaction) {
  auto expect_keys = [](Engine& e, std::optional<std::string> kept,
                        std::optional<std::string> replaced) {
    EXPECT_EQ(e.GetQueueKey("kept"), kept);
    EXPECT_EQ(e.GetQueueKey("replaced"), replaced);
    EXPECT_EQ(e.GetQueueKey("removed"), std::nullopt);
    EXPECT_EQ(e.GetQueueKey("emails"), std::nullopt);
  };
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    original_.SetQueueKey("kept", Digest('k'));
    original_.SetQueueKey("replaced", Digest('a'));
    original_.clock().Advance(10);
    original_.SetQueueKey("replaced", Digest('b'));
    original_.SetQueueKey("removed", Digest('r'));
    original_.SetQueueKey("removed", std::nullopt);
    original_.Push("emails", {Job("hello")});
    original_.SetQueueKey("emails", Digest('e'));
    original_.SetQueueKey("emails", std::nullopt);
  }
  {
    Recovered r = RecoverInto(dir_.path(), true);
    EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
    expect_keys(*r.engine, Digest('k'), Digest('b'));
    r.engine->backend().ScheduleAll();  // forgets the names that hold nothing, as at start-up
    EXPECT_EQ(r.engine->backend().Summarize().queues, 3u);  // kept, replaced, emails
  }
  Engine second;
  {
    EmbeddedStore store(second.backend(), Options(dir_.path()));
    expect_keys(second, Digest('k'), Digest('b'));
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    second.SetQueueKey("replaced", std::nullopt);  // after the cut: in the log only
    second.SetQueueKey("late", Digest('l'));
  }
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 3u);
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(second.backend()));
  expect_keys(*r.engine, Digest('k'), std::nullopt);
  EXPECT_EQ(r.engine->GetQueueKey("late"), Digest('l'));
  r.engine->backend().ScheduleAll();
  EXPECT_EQ(r.engine->backend().Summarize().queues, 3u);  // kept, emails, late
}

// A state of another layout version is refused, never misread.
TEST(LogStateFormatTest, OtherStateFormatsAreRefused) {
  Engine e;
  e.Push("emails", {Job("hello"), Job("later", 0, 30'000)});
  std::string current = StateOf(e.backend());
  ByteReader in(current);
  ASSERT_EQ(in.Get<uint32_t>(), 1u);
  for (char format : {0, 2, 3}) {
    std::string other = current;
    other[0] = format;
    FakeClock clock(e.clock().NowMs());
    MemoryBackend refused(clock, MemoryBackendOptions{.run_timer = false});
    ByteReader other_in(other);
    EXPECT_FALSE(refused.LoadState(other_in)) << int(format);
  }
}

// The record's body (opt-str digest) decodes whole or changes nothing; a digest that is not
// 32 bytes was never written by SetQueueKey (it refuses one), so it is damage.
TEST(LogStateFormatTest, SetQueueKeyRecordsReplayAndRefuseDamage) {
  auto record = [](std::string_view queue, std::optional<std::string> digest) {
    std::string out;
    EncodeChange(out, 1'700'000'000'000, queue, SetQueueKeyRecord{.digest = digest});
    return out;
  };
  Engine e;
  MemoryBackend& b = e.backend();
  ASSERT_TRUE(b.Replay(record("q", Digest('a'))).ok());
  EXPECT_EQ(e.GetQueueKey("q"), Digest('a'));
  ASSERT_TRUE(b.Replay(record("q", std::nullopt)).ok());
  EXPECT_EQ(e.GetQueueKey("q"), std::nullopt);
  EXPECT_EQ(b.Summarize().queues, 0u) << "a name that held only its key is forgotten";
  ASSERT_TRUE(b.Replay(record("q", Digest('b'))).ok());

  std::string cut = record("q", Digest('c'));
  cut.pop_back();
  EXPECT_FALSE(b.Replay(cut).ok());
  auto wrong = b.Replay(record("q", std::string(31, 'c')));
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("out of range"), std::string::npos) << wrong.message();
  EXPECT_EQ(e.GetQueueKey("q"), Digest('b')) << "records refused changed nothing";
}

TEST_F(LogStoreRecoveryTest, SecondCompactionReplacesTheFirst) {
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    RunRoomsAndQueues(original_);
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    RunRoomsAndQueues(original_, "-b");
    ASSERT_TRUE(store.Compact(error)) << error;
    EXPECT_EQ(store.compaction_stats().compactions, 2u);
    RunRoomsAndQueues(original_, "-c");
  }
  DirListing files = ListDir(dir_.path());
  EXPECT_EQ(files.snapshots, (std::vector<uint64_t>{3}));
  EXPECT_EQ(files.segments, (std::vector<uint64_t>{3}));
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 3u);
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
}

TEST_F(LogStoreRecoveryTest, CompactThenDeletedSnapshotIsNamedAsMissing) {
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    RunRoomsAndQueues(original_);
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    original_.PutRoom("after-cut", 4);
  }
  ASSERT_TRUE(std::filesystem::remove(dir_ / SnapshotName(2)));
  std::string error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, dir_ / SnapshotName(2))) << error;
  EXPECT_TRUE(Contains(error, "missing")) << error;
}

TEST_F(LogStoreRecoveryTest, CompactThenDeletedSegmentIsNamedAsMissing) {
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    RunRoomsAndQueues(original_);
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    original_.PutRoom("r2", 1);
    {
      std::unique_lock world(original_.backend().world());
      EXPECT_EQ(store.journal().Rotate(), 3u);
    }
    original_.PutRoom("r3", 1);
  }
  ASSERT_TRUE(std::filesystem::remove(Segment(2)));
  std::string error = RecoverError(dir_.path());
  EXPECT_TRUE(Contains(error, dir_ / SegmentName(2) + ": missing")) << error;
}

TEST_F(LogStoreRecoveryTest, DamagedSnapshotIsNamedWithItsOffset) {
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    RunRoomsAndQueues(original_);
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
  }
  const std::string snap = dir_ / SnapshotName(2);
  FlipByte(snap, kFileHeaderBytes + kRecordHeaderBytes + 3);
  std::string error = RecoverError(dir_.path());
  EXPECT_EQ(error.rfind(snap + ": offset 32: ", 0), 0u) << error;
}

// Both snapshot writers cut at the same place and write the same bytes; a state of about
// 3 MiB spans several snapshot records, so the copy is passed on in pieces.
class SnapshotWriterTest : public LogStoreRecoveryTest,
                           public ::testing::WithParamInterface<SnapshotWriter> {};

TEST_P(SnapshotWriterTest, CompactsToTheStateAtTheCutAndRecoversIt) {
  if (GetParam() == SnapshotWriter::kForkedChild &&
      kDefaultSnapshotWriter != SnapshotWriter::kForkedChild) {
    GTEST_SKIP() << "this build's sanitizer runtime cannot fork a writer safely";
  }
  EmbeddedOptions options = Options(dir_.path());
  options.snapshot_writer = GetParam();
  std::string state_at_cut;
  {
    EmbeddedStore store(original_.backend(), options);
    RunRoomsAndQueues(original_);
    std::vector<core::JobSpec> big;
    for (int i = 0; i < 3000; ++i) {
      core::JobSpec job;
      job.payload = std::string(1000, static_cast<char>('a' + i % 26));
      big.push_back(std::move(job));
    }
    original_.Push("big", std::move(big));
    state_at_cut = RawStateOf(original_.backend());
    ASSERT_GT(state_at_cut.size(), 3u << 20);
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    EmbeddedStore::CompactionStats stats = store.compaction_stats();
    EXPECT_EQ(stats.compactions, 1u);
    EXPECT_EQ(stats.written_here, GetParam() == SnapshotWriter::kThisProcess ? 1u : 0u);
    EXPECT_EQ(stats.last_fork_error, "");
    EXPECT_TRUE(ListDir(dir_.path()).temporaries.empty());
    original_.PutRoom("after-cut", 4);
  }
  std::string snap_state, snap_error;
  ASSERT_TRUE(ReadSnapshotFile(dir_ / SnapshotName(2), 2, snap_state, snap_error)) << snap_error;
  EXPECT_EQ(snap_state, state_at_cut);
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 2u);
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
}

INSTANTIATE_TEST_SUITE_P(Writers, SnapshotWriterTest,
                         ::testing::Values(SnapshotWriter::kForkedChild,
                                           SnapshotWriter::kThisProcess),
                         [](const auto& info) {
                           return info.param == SnapshotWriter::kForkedChild ? "ForkedChild"
                                                                             : "ThisProcess";
                         });

TEST_F(LogStoreRecoveryTest, AFailedForkIsReportedAndTheSnapshotWrittenHere) {
  EmbeddedOptions options = Options(dir_.path());
  options.snapshot_writer = SnapshotWriter::kForkedChild;
  options.fork = [] {
    errno = ENOMEM;  // as under vm.overcommit_memory=2 with a large state
    return pid_t{-1};
  };
  {
    EmbeddedStore store(original_.backend(), options);
    RunRoomsAndQueues(original_);
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    EmbeddedStore::CompactionStats stats = store.compaction_stats();
    EXPECT_EQ(stats.compactions, 1u);
    EXPECT_EQ(stats.written_here, 1u);
    EXPECT_EQ(stats.last_fork_error, ErrnoText(ENOMEM));
    EXPECT_EQ(ListDir(dir_.path()).snapshots, (std::vector<uint64_t>{2}));
    original_.PutRoom("after-cut", 4);
  }
  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_EQ(r.report.snapshot, 2u);
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
}

TEST_F(LogStoreRecoveryTest, LeftoversOfAnInterruptedCompactionAreRemoved) {
  std::string old_segment;
  {
    EmbeddedStore store(original_.backend(), Options(dir_.path()));
    RunRoomsAndQueues(original_);
    ASSERT_TRUE(store.journal().SyncAll(5s));
    old_segment = ReadAll(Segment(1));
    std::string error;
    ASSERT_TRUE(store.Compact(error)) << error;
    original_.PutRoom("after-cut", 4);
  }
  // As if the compaction had written its snapshot but not deleted what it replaces, and
  // another had died while writing its snapshot.
  ASSERT_EQ(ListDir(dir_.path()).segments, (std::vector<uint64_t>{2}));
  WriteAllTo(Segment(1), old_segment);
  const std::string tmp = dir_ / (SnapshotName(3) + ".tmp");
  WriteAllTo(tmp, "half a snapshot");

  // Without repair nothing is removed.
  Recovered check = RecoverInto(dir_.path(), false);
  EXPECT_TRUE(std::filesystem::exists(tmp));
  EXPECT_TRUE(std::filesystem::exists(Segment(1)));
  EXPECT_EQ(check.report.segments, (std::vector<uint64_t>{2}));
  EXPECT_EQ(StateOf(check.engine->backend()), StateOf(original_.backend()));

  Recovered r = RecoverInto(dir_.path(), true);
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_FALSE(std::filesystem::exists(Segment(1)));
  EXPECT_EQ(r.report.snapshot, 2u);
  EXPECT_EQ(r.report.segments, (std::vector<uint64_t>{2}));
  ASSERT_EQ(r.report.warnings.size(), 2u);
  EXPECT_TRUE(Contains(r.report.warnings[0], tmp + ": unfinished snapshot removed"))
      << r.report.warnings[0];
  EXPECT_TRUE(Contains(r.report.warnings[1], Segment(1) + ": replaced by a snapshot"))
      << r.report.warnings[1];
  EXPECT_EQ(StateOf(r.engine->backend()), StateOf(original_.backend()));
}

}  // namespace
}  // namespace anteroom::store::log

namespace anteroom::store::log {
namespace {

// The log written before a restart counts towards the next compaction: a server that restarts
// before writing --compact-min-mb itself must still compact (found by the crash test).
TEST(LogCompactionTriggerTest, LogFromEarlierRunsCountsTowardsTheNextCompaction) {
  ScratchDir dir;
  EmbeddedOptions options{.dir = dir.path(),
                          .fsync = FsyncPolicy::kNo,
                          .compact_min_bytes = 6'000,
                          .compact_in_background = true};
  for (int run = 0; run < 3; ++run) {
    Engine e;
    EmbeddedStore store(e.backend(), options);
    // ~2.5 kB of log per run: under the threshold alone, over it from the third run on.
    for (int i = 0; i < 10; ++i) e.Push("q", {Job(std::string(200, 'a' + run))});
    if (run < 2) continue;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (store.compaction_stats().compactions == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(store.compaction_stats().compactions, 1u);
  }
  DirListing files = ListDir(dir.path());
  ASSERT_EQ(files.snapshots.size(), 1u);
  EXPECT_EQ(files.segments.front(), files.snapshots.front());  // older segments deleted
}

}  // namespace
}  // namespace anteroom::store::log
