// Unit tests of LogJournal (store/log/journal.h): concurrent appends under each fsync policy,
// group commit, rotation, BytesSince, and disk-full handling through the ANTEROOM_FAULT_DISK_FULL
// seam of file_io.h. Each test writes to its own temporary directory.

#include "store/log/journal.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/loop_turn.h"
#include "scratch_dir.h"
#include "store/log/data_dir.h"
#include "store/log/file_io.h"
#include "store/log/record_format.h"

namespace anteroom::store::log {
namespace {

using namespace std::chrono_literals;

class ScratchDir : public anteroom::testing::ScratchDir {
 public:
  ScratchDir() : anteroom::testing::ScratchDir("anteroom-journal-test") {}
};

// Sets an environment variable for the life of the guard (create it before any journal, so no
// flusher thread reads the environment while it changes).
class EnvGuard {
 public:
  EnvGuard(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvGuard() { ::unsetenv(name_); }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
};

// Polls `done` every millisecond until it holds or `limit` passes; answers its last value.
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Whether `dir` is on tmpfs or ramfs, where fdatasync costs nothing.
bool OnMemoryFilesystem(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) return false;
  return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

void CreateFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  ::close(fd);
}

std::string ReadAll(const std::string& path) {
  std::string data;
  int error = 0;
  EXPECT_TRUE(ReadFile(path, data, error)) << path << ": " << ErrnoText(error);
  return data;
}

struct Segment {
  ScanResult scan;
  std::vector<std::string> payloads;
  std::vector<size_t> offsets;
  size_t size = 0;
};

Segment ReadSegment(const std::string& dir, uint64_t segment) {
  Segment s;
  std::string data = ReadAll(dir + "/" + SegmentName(segment));
  s.size = data.size();
  s.scan = Scan(data, FileKind::kLog, [&](std::string_view payload, size_t offset, std::string&) {
    s.payloads.emplace_back(payload);
    s.offsets.push_back(offset);
    return true;
  });
  return s;
}

// The bytes a record of `payload` takes in the log (what its lsn advances by).
uint64_t Framed(std::string_view payload) { return kRecordHeaderBytes + payload.size(); }

uint64_t FramedTotal(const std::vector<std::string>& payloads) {
  uint64_t n = 0;
  for (const auto& p : payloads) n += Framed(p);
  return n;
}

// Waits (bounded) for the answer WhenDurable gives for `lsn`.
std::optional<bool> AwaitDurable(LogJournal& journal, uint64_t lsn,
                                 std::chrono::milliseconds limit = 10s) {
  auto promise = std::make_shared<std::promise<bool>>();
  auto future = promise->get_future();
  journal.WhenDurable(lsn, [promise](bool ok) { promise->set_value(ok); });
  if (future.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return future.get();
}

// The answer WhenDurable gives before it returns (nullopt: none yet).
std::optional<bool> InlineAnswer(LogJournal& journal, uint64_t lsn) {
  auto answer = std::make_shared<std::atomic<int>>(0);  // outlives a late answer
  journal.WhenDurable(lsn, [answer](bool ok) { answer->store(ok ? 1 : 2); });
  int got = answer->load();
  if (got == 0) return std::nullopt;
  return got == 1;
}

std::string Payload(int thread, int k) {
  return "t" + std::to_string(thread) + "-" + std::to_string(k) + "-" +
         std::string(static_cast<size_t>(k % 17), 'p');
}

const FsyncPolicy kPolicies[] = {FsyncPolicy::kAlways, FsyncPolicy::kEverySec, FsyncPolicy::kNo};

std::string PolicyName(const ::testing::TestParamInfo<FsyncPolicy>& info) {
  return ToString(info.param);
}

class LogJournalPolicyTest : public ::testing::TestWithParam<FsyncPolicy> {
 protected:
  ScratchDir dir_;
};

INSTANTIATE_TEST_SUITE_P(LogPolicies, LogJournalPolicyTest, ::testing::ValuesIn(kPolicies),
                         PolicyName);

// ---- appends -------------------------------------------------------------------------------

TEST_P(LogJournalPolicyTest, ConcurrentAppendsAreDurableAndScanCleanInPerThreadOrder) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  // Declared before the journal: answers may still arrive while it stops.
  std::atomic<int> answered_ok{0}, answered_failed{0}, answered_early{0};
  LogJournal journal(dir_.path(), GetParam(), 1);
  EXPECT_TRUE(journal.Writable());
  EXPECT_EQ(journal.Problem(), "");
  EXPECT_EQ(journal.DurableLsn(), 0u);

  std::vector<std::vector<uint64_t>> lsns(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int k = 0; k < kPerThread; ++k) {
        uint64_t lsn = journal.Append(Payload(t, k));
        lsns[t].push_back(lsn);
        journal.WhenDurable(lsn, [&, lsn](bool ok) {
          if (!ok) {
            ++answered_failed;
          } else {
            if (journal.DurableLsn() < lsn) ++answered_early;
            ++answered_ok;
          }
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  const int total = kThreads * kPerThread;
  EXPECT_TRUE(WaitUntil([&] { return answered_ok + answered_failed == total; }))
      << answered_ok << " of " << total << " answered";
  EXPECT_EQ(answered_ok, total);
  EXPECT_EQ(answered_failed, 0);
  EXPECT_EQ(answered_early, 0);

  uint64_t expected_bytes = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kPerThread; ++k) expected_bytes += Framed(Payload(t, k));
  }
  // Every lsn distinct, increasing within a thread, the largest the whole log's length.
  std::vector<uint64_t> all;
  for (const auto& v : lsns) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "an lsn answered twice";
  EXPECT_EQ(all.back(), expected_bytes);

  ASSERT_TRUE(journal.SyncAll(5s)) << journal.Problem();
  EXPECT_EQ(journal.DurableLsn(), expected_bytes);
  JournalStats stats = journal.Stats();
  EXPECT_EQ(stats.appended_bytes, expected_bytes);
  EXPECT_EQ(stats.written_bytes, expected_bytes);
  EXPECT_GE(stats.writes, 1u);
  EXPECT_GE(stats.syncs, 1u);  // SyncAll syncs whatever the policy
  EXPECT_EQ(stats.segment, 1u);
  EXPECT_EQ(journal.CurrentSegment(), 1u);

  Segment seg = ReadSegment(dir_.path(), 1);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.scan.sequence, 1u);
  EXPECT_EQ(seg.size, kFileHeaderBytes + expected_bytes);
  ASSERT_EQ(seg.payloads.size(), static_cast<size_t>(total));
  // Each thread's records appear in the order it appended them, each exactly once, and each
  // ends exactly at the file offset its lsn names.
  std::vector<int> next(kThreads, 0);
  for (size_t i = 0; i < seg.payloads.size(); ++i) {
    const std::string& p = seg.payloads[i];
    int t = std::stoi(p.substr(1));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    ASSERT_LT(next[t], kPerThread) << "thread " << t << " has too many records";
    EXPECT_EQ(p, Payload(t, next[t])) << "record " << i;
    EXPECT_EQ(seg.offsets[i] + Framed(p), kFileHeaderBytes + lsns[t][next[t]]) << "record " << i;
    ++next[t];
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread) << "thread " << t;
}

// An I/O thread's turn (common/loop_turn.h): the answers waiting on its records are held to
// the end of the turn, then the thread itself writes them all in one write() and answers them,
// on this thread: nothing is handed to the flusher. Under `always` the flusher runs one
// fdatasync() for the group and answers it.
TEST_P(LogJournalPolicyTest, AnswersOfOneLoopTurnShareOneWriteOnTheLoopThread) {
  std::vector<std::function<void()>> turn_end;
  LoopTurn::Bind([&](std::function<void()> fn) { turn_end.push_back(std::move(fn)); });
  struct Unbind {
    ~Unbind() { LoopTurn::Unbind(); }
  } unbind;
  LogJournal journal(dir_.path(), GetParam(), 1);
  const JournalStats before = journal.Stats();
  const std::thread::id loop_thread = std::this_thread::get_id();
  std::vector<std::optional<bool>> answers(5);
  std::vector<std::thread::id> answered_on(5);
  std::atomic<int> answered{0};  // answers are given in lsn order
  for (int k = 0; k < 5; ++k) {
    uint64_t lsn = journal.Append(Payload(0, k));
    journal.WhenDurable(lsn, [&, k](bool ok) {
      answers[k] = ok;
      answered_on[k] = std::this_thread::get_id();
      ++answered;
    });
  }
  ASSERT_EQ(turn_end.size(), 1u);     // one end-of-turn write for the whole turn
  std::this_thread::sleep_for(20ms);  // the flusher, had it been woken, would have written
  for (const auto& a : answers) EXPECT_FALSE(a.has_value());
  EXPECT_EQ(journal.Stats().writes, before.writes);

  auto run = std::move(turn_end);
  turn_end.clear();
  for (auto& fn : run) fn();
  const bool always = GetParam() == FsyncPolicy::kAlways;
  if (always) {
    // The journal's thread syncs the group once and answers it.
    ASSERT_TRUE(
        WaitUntil([&] { return journal.DurableLsn() >= journal.Stats().written_bytes; }, 5s));
    ASSERT_TRUE(WaitUntil([&] { return journal.Stats().syncs == before.syncs + 1; }, 5s));
  }
  const JournalStats after = journal.Stats();
  EXPECT_EQ(after.writes, before.writes + 1);
  if (always) {
    EXPECT_EQ(after.syncs, before.syncs + 1);
  }
  for (int k = 0; k < 5; ++k) {
    if (always) {
      ASSERT_TRUE(WaitUntil([&] { return answered.load() > k; }, 5s)) << k;
    }
    EXPECT_EQ(answers[k], std::optional<bool>(true)) << k;
    if (!always) {
      EXPECT_EQ(answered_on[k], loop_thread) << k;
    }
  }
  EXPECT_TRUE(turn_end.empty());
  // The next turn queues its own write.
  uint64_t lsn = journal.Append("next");
  std::atomic<int> next{0};
  journal.WhenDurable(lsn, [&](bool ok) { next = ok ? 1 : 2; });
  ASSERT_EQ(turn_end.size(), 1u);
  turn_end.front()();
  ASSERT_TRUE(WaitUntil([&] { return next.load() != 0; }, 5s));
  EXPECT_EQ(next.load(), 1);
  ASSERT_TRUE(journal.SyncAll(5s));
  Segment seg = ReadSegment(dir_.path(), 1);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.payloads.size(), 6u);
}

TEST_P(LogJournalPolicyTest, WhenDurableOfAnOldLsnAnswersInline) {
  LogJournal journal(dir_.path(), GetParam(), 1);
  uint64_t lsn = journal.Append("one");
  EXPECT_EQ(lsn, Framed("one"));
  ASSERT_EQ(AwaitDurable(journal, lsn), std::optional<bool>(true));
  EXPECT_EQ(InlineAnswer(journal, lsn), std::optional<bool>(true));
  EXPECT_GE(journal.DurableLsn(), lsn);
}

TEST_P(LogJournalPolicyTest, DestructorWritesWhatWasAppended) {
  std::vector<std::string> payloads;
  {
    LogJournal journal(dir_.path(), GetParam(), 1);
    for (int k = 0; k < 50; ++k) {
      payloads.push_back(Payload(0, k));
      journal.Append(payloads.back());
    }
  }
  Segment seg = ReadSegment(dir_.path(), 1);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.payloads, payloads);
  EXPECT_EQ(seg.size, kFileHeaderBytes + FramedTotal(payloads));
}

TEST_P(LogJournalPolicyTest, SyncAllWithNothingAppendedSucceeds) {
  LogJournal journal(dir_.path(), GetParam(), 5);
  EXPECT_TRUE(journal.SyncAll(2s));
  Segment seg = ReadSegment(dir_.path(), 5);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.scan.sequence, 5u);
  EXPECT_EQ(seg.size, kFileHeaderBytes);
}

// ---- group commit --------------------------------------------------------------------------

TEST(LogJournalTest, GroupCommitUnderAlwaysSharesSyncsBetweenWaitingThreads) {
  ScratchDir dir;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 40;
  LogJournal journal(dir.path(), FsyncPolicy::kAlways, 1);
  std::atomic<int> failures{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int k = 0; k < kPerThread; ++k) {
        // Like a request: append, then wait for durability before the next one.
        uint64_t lsn = journal.Append(Payload(t, k));
        std::optional<bool> ok = AwaitDurable(journal, lsn);
        if (ok != std::optional<bool>(true)) ++failures;
        if (journal.DurableLsn() < lsn) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  const uint64_t records = kThreads * kPerThread;
  JournalStats stats = journal.Stats();
  // Each record was synced before its thread went on (`always`), yet syncs were shared: one
  // per record would be 320. How many records a sync serves depends on what it costs, since
  // records gather while it runs: measured 45-115 syncs on a disk (optimised or sanitized
  // build, CPUs busy or not). On tmpfs fdatasync costs nothing and batches are small (up to
  // ~270 syncs under the sanitizers with the CPUs busy), so there only some sharing is required.
  EXPECT_GE(stats.syncs, 1u);
  EXPECT_LE(stats.syncs, stats.writes);
  const uint64_t limit = OnMemoryFilesystem(dir.path()) ? records : records / 2;
  EXPECT_LT(stats.syncs, limit) << "syncs " << stats.syncs << " for " << records << " records";
  Segment seg = ReadSegment(dir.path(), 1);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.payloads.size(), records);
}

TEST(LogJournalTest, RecordsGatheredWhileItCannotWriteGoOutInOneWriteAndOneSync) {
  ScratchDir dir;
  const std::string flag = dir / "disk-full.flag";
  EnvGuard env("ANTEROOM_FAULT_DISK_FULL", flag);
  LogJournal journal(dir.path(), FsyncPolicy::kAlways, 1);
  ASSERT_EQ(AwaitDurable(journal, journal.Append("first")), std::optional<bool>(true));
  const JournalStats before = journal.Stats();
  EXPECT_EQ(before.writes, 1u);
  EXPECT_EQ(before.syncs, 1u);

  CreateFile(flag);
  uint64_t lsn = journal.Append("blocked-0");
  ASSERT_EQ(AwaitDurable(journal, lsn, 5s), std::optional<bool>(false));
  // Many records from several threads pile up while the flusher retries.
  constexpr int kThreads = 8, kPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) journal.Append(Payload(t, k));
    });
  }
  for (auto& th : threads) th.join();
  const uint64_t last = journal.Stats().appended_bytes;
  JournalStats during = journal.Stats();
  EXPECT_EQ(during.writes, before.writes);
  EXPECT_EQ(during.syncs, before.syncs);
  EXPECT_EQ(during.written_bytes, before.written_bytes);

  ASSERT_EQ(::unlink(flag.c_str()), 0);
  ASSERT_TRUE(WaitUntil([&] { return journal.DurableLsn() >= last; }, 2s));
  JournalStats after = journal.Stats();
  EXPECT_EQ(after.writes, before.writes + 1);  // 201 records, one write()
  EXPECT_EQ(after.syncs, before.syncs + 1);    // and one fdatasync()
  EXPECT_EQ(after.written_bytes, last);
  Segment seg = ReadSegment(dir.path(), 1);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.payloads.size(), 2u + kThreads * kPerThread);
}

// ---- rotation ------------------------------------------------------------------------------

TEST(LogJournalTest, RotateSplitsRecordsAcrossSegmentsAtTheCut) {
  ScratchDir dir;
  LogJournal journal(dir.path(), FsyncPolicy::kNo, 1);
  std::vector<std::string> a, b, d;
  for (int k = 0; k < 5; ++k) a.push_back("a" + std::to_string(k));
  for (int k = 0; k < 3; ++k) b.push_back("bb" + std::to_string(k));
  for (int k = 0; k < 2; ++k) d.push_back("dddd" + std::to_string(k));

  // No waiting between appends and rotations: the flusher must place the cuts by lsn.
  for (const auto& p : a) journal.Append(p);
  EXPECT_EQ(journal.Rotate(), 2u);
  EXPECT_EQ(journal.CurrentSegment(), 2u);
  for (const auto& p : b) journal.Append(p);
  EXPECT_EQ(journal.Rotate(), 3u);
  EXPECT_EQ(journal.Rotate(), 4u);  // segment 3 stays empty
  uint64_t last = 0;
  for (const auto& p : d) last = journal.Append(p);
  EXPECT_EQ(journal.Stats().segment, 4u);

  const uint64_t bytes_a = FramedTotal(a), bytes_b = FramedTotal(b), bytes_d = FramedTotal(d);
  EXPECT_EQ(last, bytes_a + bytes_b + bytes_d);
  EXPECT_EQ(journal.BytesSince(0), bytes_a + bytes_b + bytes_d);
  EXPECT_EQ(journal.BytesSince(1), bytes_a + bytes_b + bytes_d);
  EXPECT_EQ(journal.BytesSince(2), bytes_b + bytes_d);
  EXPECT_EQ(journal.BytesSince(3), bytes_d);
  EXPECT_EQ(journal.BytesSince(4), bytes_d);
  EXPECT_EQ(journal.BytesSince(5), 0u);

  ASSERT_EQ(AwaitDurable(journal, last), std::optional<bool>(true));
  ASSERT_TRUE(journal.SyncAll(5s)) << journal.Problem();

  const std::vector<std::vector<std::string>> expected = {a, b, {}, d};
  for (uint64_t s = 1; s <= 4; ++s) {
    Segment seg = ReadSegment(dir.path(), s);
    EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << "segment " << s << ": " << seg.scan.problem;
    EXPECT_EQ(seg.scan.sequence, s);
    EXPECT_EQ(seg.payloads, expected[s - 1]) << "segment " << s;
    EXPECT_EQ(seg.size, kFileHeaderBytes + FramedTotal(expected[s - 1])) << "segment " << s;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / SegmentName(5)));
  EXPECT_EQ(ListDir(dir.path()).segments, (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST(LogJournalTest, BytesSinceCountsFromTheFirstSegment) {
  ScratchDir dir;
  LogJournal journal(dir.path(), FsyncPolicy::kEverySec, 7);
  EXPECT_EQ(journal.CurrentSegment(), 7u);
  EXPECT_EQ(journal.BytesSince(7), 0u);
  journal.Append("0123456789");
  journal.Append("");
  EXPECT_EQ(journal.BytesSince(1), 2 * kRecordHeaderBytes + 10);
  EXPECT_EQ(journal.BytesSince(7), 2 * kRecordHeaderBytes + 10);
  EXPECT_EQ(journal.BytesSince(8), 0u);
  EXPECT_EQ(journal.Rotate(), 8u);
  journal.Append("abc");
  EXPECT_EQ(journal.BytesSince(7), 3 * kRecordHeaderBytes + 13);
  EXPECT_EQ(journal.BytesSince(8), kRecordHeaderBytes + 3);
  EXPECT_EQ(journal.Stats().appended_bytes, 3 * kRecordHeaderBytes + 13);
  ASSERT_TRUE(journal.SyncAll(5s));
  EXPECT_EQ(ReadSegment(dir.path(), 7).payloads, (std::vector<std::string>{"0123456789", ""}));
  EXPECT_EQ(ReadSegment(dir.path(), 8).payloads, (std::vector<std::string>{"abc"}));
  EXPECT_FALSE(std::filesystem::exists(dir / SegmentName(1)));
}

TEST(LogJournalTest, ConstructorThrowsWhenTheSegmentCannotBeCreated) {
  ScratchDir dir;
  std::string missing = dir / "no-such-subdir";
  try {
    LogJournal journal(missing, FsyncPolicy::kAlways, 1);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(SegmentName(1) + ": cannot create"), std::string::npos)
        << e.what();
  }
}

// SyncAll promises to wait until everything appended before it is synced, whatever the policy,
// also when another SyncAll is under way. Round after round: one thread's SyncAll makes the
// flusher sync; while it does, another record is appended and a second SyncAll asks for it.
TEST_P(LogJournalPolicyTest, OverlappingSyncAllCallsBothSucceed) {
  LogJournal journal(dir_.path(), GetParam(), 1);
  const int delays_us[] = {0, 50, 100, 200, 500};
  for (int round = 0; round < 25; ++round) {
    journal.Append("first of round " + std::to_string(round));
    bool first_ok = false;
    std::thread first([&] { first_ok = journal.SyncAll(3s); });
    std::this_thread::sleep_for(std::chrono::microseconds(delays_us[round % 5]));
    uint64_t lsn = journal.Append("second of round " + std::to_string(round));
    auto started = std::chrono::steady_clock::now();
    bool second_ok = journal.SyncAll(3s);
    auto waited = std::chrono::steady_clock::now() - started;
    first.join();
    ASSERT_TRUE(first_ok) << "round " << round;
    ASSERT_TRUE(second_ok) << "round " << round << ": SyncAll gave up although the disk is fine ("
                           << journal.Problem() << ")";
    // Nothing is wrong with the disk: a sync takes milliseconds, not the everysec period.
    ASSERT_LT(waited, 900ms) << "round " << round;
    ASSERT_GE(journal.DurableLsn(), lsn);
  }
}

// ---- disk full -----------------------------------------------------------------------------

TEST_P(LogJournalPolicyTest, DiskFullRefusesThenResumesWithoutDamage) {
  const std::string flag = dir_ / "disk-full.flag";
  EnvGuard env("ANTEROOM_FAULT_DISK_FULL", flag);
  std::vector<std::string> expected;
  {
    LogJournal journal(dir_.path(), GetParam(), 1);
    uint64_t lsn = 0;
    for (int k = 0; k < 3; ++k) {
      expected.push_back("before-" + std::to_string(k));
      lsn = journal.Append(expected.back());
    }
    ASSERT_EQ(AwaitDurable(journal, lsn), std::optional<bool>(true));
    const uint64_t durable_before = journal.DurableLsn();
    EXPECT_EQ(durable_before, lsn);

    CreateFile(flag);
    expected.push_back("during-0");
    uint64_t lsn_x = journal.Append(expected.back());
    EXPECT_EQ(AwaitDurable(journal, lsn_x, 5s), std::optional<bool>(false));
    EXPECT_FALSE(journal.Writable());
    EXPECT_NE(journal.Problem().find("No space left"), std::string::npos) << journal.Problem();
    EXPECT_NE(journal.Problem().find(SegmentName(1)), std::string::npos) << journal.Problem();
    EXPECT_EQ(journal.DurableLsn(), durable_before);

    // While it cannot write, a new record's answer is "no" at once.
    expected.push_back("during-1");
    uint64_t lsn_y = journal.Append(expected.back());
    EXPECT_EQ(InlineAnswer(journal, lsn_y), std::optional<bool>(false));
    // Still refusing after a few retries.
    std::this_thread::sleep_for(250ms);
    EXPECT_FALSE(journal.Writable());
    EXPECT_EQ(journal.DurableLsn(), durable_before);

    ASSERT_EQ(::unlink(flag.c_str()), 0);
    EXPECT_TRUE(WaitUntil([&] { return journal.Writable(); }, 2s)) << journal.Problem();
    EXPECT_EQ(journal.Problem(), "");
    EXPECT_TRUE(WaitUntil([&] { return journal.DurableLsn() >= lsn_y; }, 2s))
        << journal.DurableLsn() << " < " << lsn_y;
    EXPECT_EQ(InlineAnswer(journal, lsn_y), std::optional<bool>(true));

    expected.push_back("after-0");
    uint64_t lsn_z = journal.Append(expected.back());
    EXPECT_EQ(AwaitDurable(journal, lsn_z), std::optional<bool>(true));
    ASSERT_TRUE(journal.SyncAll(5s)) << journal.Problem();
    EXPECT_EQ(journal.Stats().written_bytes, FramedTotal(expected));
  }
  Segment seg = ReadSegment(dir_.path(), 1);
  EXPECT_EQ(seg.scan.end, ScanResult::End::kClean) << seg.scan.problem;
  EXPECT_EQ(seg.payloads, expected);  // every record exactly once, in order
  EXPECT_EQ(seg.size, kFileHeaderBytes + FramedTotal(expected));
}

TEST_P(LogJournalPolicyTest, DiskFullAtARotationResumesInTheNewSegment) {
  const std::string flag = dir_ / "disk-full.flag";
  EnvGuard env("ANTEROOM_FAULT_DISK_FULL", flag);
  {
    LogJournal journal(dir_.path(), GetParam(), 1);
    uint64_t lsn = journal.Append("in-one");
    ASSERT_EQ(AwaitDurable(journal, lsn), std::optional<bool>(true));
    ASSERT_TRUE(journal.SyncAll(5s));

    CreateFile(flag);
    EXPECT_EQ(journal.Rotate(), 2u);
    uint64_t lsn2 = journal.Append("in-two");
    EXPECT_EQ(AwaitDurable(journal, lsn2, 5s), std::optional<bool>(false));
    EXPECT_FALSE(journal.Writable());
    EXPECT_NE(journal.Problem().find("No space left"), std::string::npos) << journal.Problem();

    ASSERT_EQ(::unlink(flag.c_str()), 0);
    EXPECT_TRUE(WaitUntil([&] { return journal.Writable(); }, 2s)) << journal.Problem();
    EXPECT_TRUE(WaitUntil([&] { return journal.DurableLsn() >= lsn2; }, 2s));
    ASSERT_TRUE(journal.SyncAll(5s)) << journal.Problem();
  }
  Segment one = ReadSegment(dir_.path(), 1);
  EXPECT_EQ(one.scan.end, ScanResult::End::kClean) << one.scan.problem;
  EXPECT_EQ(one.payloads, (std::vector<std::string>{"in-one"}));
  Segment two = ReadSegment(dir_.path(), 2);
  EXPECT_EQ(two.scan.end, ScanResult::End::kClean) << two.scan.problem;
  EXPECT_EQ(two.scan.sequence, 2u);
  EXPECT_EQ(two.payloads, (std::vector<std::string>{"in-two"}));
}

TEST(LogJournalTest, EnvironmentIsResetAfterDiskFullTests) {
  // The guard of the tests above unsets the variable; nothing else in the suite sets it.
  EXPECT_EQ(std::getenv("ANTEROOM_FAULT_DISK_FULL"), nullptr);
}

}  // namespace
}  // namespace anteroom::store::log
