#pragma once
// The durable half of the embedded backend: the in-memory state engine (store/memory/) made
// recoverable by a data directory (data_dir.h) holding a write-ahead log (journal.h, the
// engine's ChangeSink) and snapshots (snapshot_file.h). Not a backend of its own: it owns a
// MemoryBackend, and that is what the server calls.
//
// Start-up recovers the newest snapshot and replays the log after it, with each change's own
// time, so deadlines that passed while the server was down are then processed by the timer as
// if it had been running. A torn tail at the end of the last segment is truncated (warning);
// damage anywhere else refuses start-up with "FILE: offset N: ...".
//
// Compaction (Redis-style): when the log since the last snapshot outgrows
// max(compact_min_bytes, 2 x the last snapshot), the backend is paused for the instant of
// fork(); the log rotates to a new segment at that cut; the child writes the state as it was at
// the cut to a snapshot, and the parent, once it is whole and synced, deletes what it replaces.
// Requests never wait for the snapshot itself, only for the fork.
//
// Where fork() fails (ENOMEM under strict overcommit, EAGAIN at a process limit) or is not
// safe (sanitizer builds), the state is instead copied to memory during the pause and written
// from this process: correct, but the pause then lasts as long as the copy.

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/log/data_dir.h"
#include "store/log/journal.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store::log {

// Who writes a snapshot: a child forked at the cut (copy-on-write keeps its view fixed while
// the server goes on), or this process, from a copy of the state made during the pause.
enum class SnapshotWriter { kForkedChild, kThisProcess };

// g++ 12's AddressSanitizer runtime has no fork handlers: a child forked while another thread
// holds one of its allocator locks hangs in its first malloc (CI saw compaction tests hang for
// 900 s). Sanitizer builds therefore copy in this process.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr SnapshotWriter kDefaultSnapshotWriter = SnapshotWriter::kThisProcess;
#else
inline constexpr SnapshotWriter kDefaultSnapshotWriter = SnapshotWriter::kForkedChild;
#endif

struct EmbeddedOptions {
  std::string dir = "anteroom-data";
  FsyncPolicy fsync = FsyncPolicy::kEverySec;
  uint64_t compact_min_bytes = 64ull << 20;
  bool compact_in_background = true;  // tests may call Compact() themselves
  SnapshotWriter snapshot_writer = kDefaultSnapshotWriter;
  pid_t (*fork)() = ::fork;  // tests make it fail, to see the fallback
};

struct RecoveryReport {
  uint64_t snapshot = 0;  // 0: none
  size_t snapshot_bytes = 0;
  std::vector<uint64_t> segments;
  size_t records = 0;
  size_t log_bytes = 0;
  std::vector<std::string> warnings;  // torn tails truncated, leftovers removed
  double seconds = 0;
};

// Recovers `dir` into `backend` (which must be empty and not serving). With `repair`, torn
// tails are truncated and leftovers deleted; without (check-data), nothing is changed. Throws
// std::runtime_error naming the file and offset on damage. Answers the next segment number.
uint64_t Recover(const std::string& dir, MemoryBackend& backend, bool repair,
                 RecoveryReport& report);

class EmbeddedStore {
 public:
  // Locks the directory, recovers it into `backend`, attaches the log and starts compaction.
  // Throws at start-up (locked directory, damage, unwritable directory).
  EmbeddedStore(MemoryBackend& backend, EmbeddedOptions options);
  // Stops compaction, syncs the log and detaches it.
  ~EmbeddedStore();
  EmbeddedStore(const EmbeddedStore&) = delete;
  EmbeddedStore& operator=(const EmbeddedStore&) = delete;

  const RecoveryReport& recovery() const { return report_; }
  LogJournal& journal() { return *journal_; }
  // Writes a snapshot now; false with the reason in `error`.
  bool Compact(std::string& error);
  // A snapshot for a backup: written now (as Compact), and opened before a later compaction
  // may delete it, so a transfer that outlasts it still reads the whole file.
  struct HeldSnapshot {
    uint64_t snapshot = 0;  // its number: the state before log segment `snapshot`
    int64_t cut_ms = 0;     // the wall time of the cut, ms since the epoch
    int fd = -1;            // open for reading; the caller closes it
  };
  bool SnapshotAndHold(HeldSnapshot& held, std::string& error);
  const std::string& dir() const { return options_.dir; }
  // Asks the background thread to compact soon, whatever the log's size (SIGUSR1 in serve).
  void RequestCompaction();
  struct CompactionStats {
    uint64_t compactions = 0;
    double last_pause_ms = 0;     // world paused for the fork (or the copy)
    uint64_t written_here = 0;    // snapshots this process wrote itself (no fork, or fork failed)
    std::string last_fork_error;  // why the last fork failed ("" if none did)
    double last_seconds = 0;      // the whole compaction
    uint64_t last_snapshot_bytes = 0;
  };
  CompactionStats compaction_stats() const;

 private:
  void CompactionLoop();
  // Compact, with compact_mu_ held: the new snapshot's number and cut time in `made`.
  bool CompactLocked(std::string& error, HeldSnapshot& made);
  [[noreturn]] void WriteSnapshotInChild(const std::string& tmp, uint64_t segment, pid_t parent);

  MemoryBackend& backend_;
  EmbeddedOptions options_;
  DirLock lock_;
  RecoveryReport report_;
  std::unique_ptr<LogJournal> journal_;

  std::mutex compact_mu_;  // one compaction at a time
  mutable std::mutex stats_mu_;
  CompactionStats stats_;
  uint64_t snapshot_ = 0;  // the newest snapshot's number (0: none)
  uint64_t snapshot_bytes_ = 0;
  // Log since the snapshot written by earlier runs (replayed at start): it counts towards the
  // next compaction too, or a server that restarts often would never compact.
  uint64_t inherited_log_bytes_ = 0;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  bool requested_ = false;
  std::thread loop_;
};

}  // namespace anteroom::store::log
