#pragma once
// The write-ahead log of the embedded backend: change records appended in memory by the threads
// that make changes, written to segment files in groups, synced as the fsync policy says.
//
// Group write on the I/O thread (Redis's beforeSleep): an answer waiting on a record, on an I/O
// thread (common/loop_turn.h), is held until the end of that thread's event-loop turn; then the
// thread itself writes everything appended so far in one write() and sends the answers of the
// turn. No request is handed to another thread, and none wakes one. Under `always` the thread
// writes, then wakes the journal's thread, which runs one fdatasync() for everything written
// meanwhile and answers; the I/O thread goes on gathering the next group instead of waiting.
// Waiters on other threads (the backend's timer, tests) are served by the journal's own thread,
// which also writes records nobody waits for (timer expiries) within a second, and runs everysec's
// fdatasync in the background, never holding up a write.
//
// What "durable" means per policy (the answers wait for it; docs/durability.md):
//   always:   written and fdatasync'ed: survives a crash of the machine.
//   everysec: written to the kernel (survives kill -9 of the process); synced within about 1 s.
//   no:       written to the kernel; synced when the kernel decides (and at rotation and stop).
//
// Disk trouble (ENOSPC, EIO, ...): the journal becomes unwritable, answers waiting on unwritten
// records get fn(false), and the backend refuses new changes (503) before making them. Unwritten
// bytes stay in memory and the journal's thread retries every 100 ms, continuing exactly where
// the file ends, so nothing already written is touched; when a retry succeeds, changes are
// accepted again. A file left with a partial record by a crash in that state has a torn tail,
// which recovery truncates.
//
// Locks: write_mu_ (one writer at a time: the file and what is taken for it) is taken before
// mu_ (what is appended, the waiters, the counters), never the other way round.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/memory/change_sink.h"

namespace anteroom::store::log {

enum class FsyncPolicy { kAlways, kEverySec, kNo };
const char* ToString(FsyncPolicy policy);

struct JournalStats {
  uint64_t appended_bytes = 0;
  uint64_t written_bytes = 0;
  uint64_t writes = 0;
  uint64_t syncs = 0;
  uint64_t segment = 0;
};

class LogJournal final : public ChangeSink {
 public:
  // Creates segment `segment` in `dir` and starts the flusher. Throws at start-up on failure.
  LogJournal(std::string dir, FsyncPolicy policy, uint64_t segment);
  // Writes and syncs what it can, then stops the flusher.
  ~LogJournal() override;
  LogJournal(const LogJournal&) = delete;
  LogJournal& operator=(const LogJournal&) = delete;

  uint64_t Append(std::string_view record) override;
  uint64_t DurableLsn() const override { return durable_lsn_.load(std::memory_order_acquire); }
  void WhenDurable(uint64_t lsn, std::function<void(bool)> fn) override;
  bool Writable() const override { return writable_.load(std::memory_order_acquire); }
  std::string Problem() const override;

  // Records appended from now on go to a new segment; answers its number. The caller holds the
  // backend's world lock exclusively, so the cut falls between whole changes.
  uint64_t Rotate();
  // The segment records are now appended to.
  uint64_t CurrentSegment() const;
  // Waits (up to `timeout`) until everything appended so far is written and synced, whatever
  // the policy; false if it could not be.
  bool SyncAll(std::chrono::milliseconds timeout);
  // Bytes appended since the segment `segment` began (for the compaction trigger).
  uint64_t BytesSince(uint64_t segment) const;
  JournalStats Stats() const;

 private:
  struct Boundary {
    uint64_t lsn;  // records from this lsn on go to `segment`
    uint64_t segment;
  };
  struct Waiter {
    uint64_t lsn;
    std::function<void(bool)> fn;
    const void* loop;  // the I/O thread that writes for it (LoopTurn::Current()); null: flusher
  };

  // On an I/O thread, at the end of its turn: writes (and with `always` syncs) what was
  // appended, then answers this thread's waiters.
  void FlushTurn();
  void FlusherLoop();
  // Takes what was appended and writes it (write_mu_ held by the caller); with `sync`, syncs
  // it too. 0 or an errno; on failure the journal is unwritable until a retry succeeds.
  int WritePendingLocked(bool sync);
  // Flusher only: syncs what was written, without holding write_mu_ during fdatasync.
  int SyncInBackground();
  // Writes out_ (switching segments at boundaries); 0 or an errno. write_mu_ held.
  int WriteOut(uint64_t batch_end_lsn);
  int OpenSegment(uint64_t segment);
  void SetProblem(int error, const char* what);
  // Answers the waiters of `loop` (every waiter when `all`) up to the durable lsn, or every
  // waiter with false when the journal cannot write.
  void Release(const void* loop, bool all);

  const std::string dir_;
  const FsyncPolicy policy_;
  const uint64_t instance_;  // unique in the process: marks this journal's queued turn writes

  mutable std::mutex mu_;
  std::condition_variable work_cv_;    // the flusher waits for work or its next tick
  std::condition_variable synced_cv_;  // SyncAll waits for the flusher
  std::string pending_;                // appended, not yet taken by a writer
  uint64_t appended_lsn_ = 0;          // the lsn at the end of pending_
  std::deque<Boundary> boundaries_;    // rotations not yet taken by a writer
  std::vector<Waiter> waiters_;
  std::vector<std::pair<uint64_t, uint64_t>> segment_starts_;  // (segment, first lsn)
  uint64_t current_segment_ = 0;                               // where Append goes
  uint64_t synced_lsn_ = 0;                                    // written and synced
  uint64_t sync_target_ = 0;     // SyncAll wants everything up to here synced, whatever the policy
  bool flusher_kicked_ = false;  // a waiter or request for the flusher
  bool stopping_ = false;
  std::string problem_;
  std::atomic<uint64_t> durable_lsn_{0};
  std::atomic<bool> writable_{true};
  JournalStats stats_;  // guarded by mu_

  // Guarded by write_mu_.
  std::mutex write_mu_;
  int fd_ = -1;
  uint64_t fd_segment_ = 0;
  std::string out_;             // taken from pending_, not yet written (kept across failures)
  uint64_t out_start_lsn_ = 0;  // the lsn of out_[0]: everything before it is written
  std::vector<Boundary> taken_boundaries_;
  bool unsynced_ = false;  // written bytes not yet synced
  bool failed_ = false;    // the last write or sync failed: only the flusher retries
  std::chrono::steady_clock::time_point last_sync_;

  std::thread flusher_;
};

}  // namespace anteroom::store::log
