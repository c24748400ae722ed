#include "store/log/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "common/loop_turn.h"
#include "store/log/data_dir.h"
#include "store/log/file_io.h"
#include "store/log/record_format.h"

namespace anteroom::store::log {

namespace {
constexpr auto kRetryAfterFailure = std::chrono::milliseconds(100);
constexpr auto kEverySec = std::chrono::seconds(1);
// The journals whose end-of-turn write this thread has queued (one, in a server).
// By instance number, not address: a journal made later at the same address must not be taken
// for one whose queued write never ran (a loop stopped with it pending).
thread_local std::vector<uint64_t> tls_flush_queued;
std::atomic<uint64_t> next_instance{1};
}  // namespace

const char* ToString(FsyncPolicy policy) {
  switch (policy) {
    case FsyncPolicy::kAlways:
      return "always";
    case FsyncPolicy::kEverySec:
      return "everysec";
    case FsyncPolicy::kNo:
      return "no";
  }
  return "everysec";
}

LogJournal::LogJournal(std::string dir, FsyncPolicy policy, uint64_t segment)
    : dir_(std::move(dir)),
      policy_(policy),
      instance_(next_instance.fetch_add(1, std::memory_order_relaxed)),
      current_segment_(segment) {
  if (int rc = OpenSegment(segment); rc != 0) {
    throw std::runtime_error(
        fmt::format("{}/{}: cannot create: {}", dir_, SegmentName(segment), ErrnoText(rc)));
  }
  segment_starts_.emplace_back(segment, 0);
  last_sync_ = std::chrono::steady_clock::now();
  flusher_ = std::thread([this] { FlusherLoop(); });
}

LogJournal::~LogJournal() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  flusher_.join();
  if (fd_ >= 0) ::close(fd_);
}

int LogJournal::OpenSegment(uint64_t segment) {
  std::string path = dir_ + "/" + SegmentName(segment);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  size_t written;
  std::string header = FileHeader(FileKind::kLog, segment);
  int rc = WriteAll(fd, header, written);
  // The header and the directory entry are synced now, so a record synced later is findable.
  if (rc == 0) rc = SyncData(fd);
  if (rc == 0) rc = SyncDir(dir_);
  if (rc != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return rc;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  fd_segment_ = segment;
  return 0;
}

uint64_t LogJournal::Append(std::string_view record) {
  // Nobody is woken: the answer that waits on this record writes it at the end of its turn
  // (or kicks the flusher); records nobody waits for go out within a second.
  std::lock_guard lock(mu_);
  size_t before = pending_.size();
  AppendRecord(pending_, record);
  appended_lsn_ += pending_.size() - before;
  stats_.appended_bytes += pending_.size() - before;
  return appended_lsn_;
}

void LogJournal::WhenDurable(uint64_t lsn, std::function<void(bool)> fn) {
  const void* loop = LoopTurn::Current();
  bool queue_turn = false;
  {
    std::lock_guard lock(mu_);
    if (lsn > durable_lsn_.load(std::memory_order_relaxed) &&
        writable_.load(std::memory_order_relaxed)) {
      waiters_.push_back({lsn, std::move(fn), loop});
      if (loop == nullptr) {
        flusher_kicked_ = true;
        work_cv_.notify_one();
      } else if (std::find(tls_flush_queued.begin(), tls_flush_queued.end(), instance_) ==
                 tls_flush_queued.end()) {
        tls_flush_queued.push_back(instance_);
        queue_turn = true;
      }
      if (!queue_turn) return;
    }
  }
  if (queue_turn) return LoopTurn::AtEnd([this] { FlushTurn(); });
  fn(lsn <= durable_lsn_.load(std::memory_order_acquire));
}

void LogJournal::FlushTurn() {
  std::erase(tls_flush_queued, instance_);
  bool sync = false;
  {
    std::lock_guard write(write_mu_);
    if (!failed_ && WritePendingLocked(false) == 0) sync = policy_ == FsyncPolicy::kAlways;
  }
  if (sync) {
    // `always`: the journal's thread syncs and answers, so this loop goes on gathering the
    // next group (and the next sync serves all of it) instead of waiting for the disk.
    std::lock_guard lock(mu_);
    flusher_kicked_ = true;
    work_cv_.notify_one();
  }
  Release(LoopTurn::Current(), /*all=*/false);
}

std::string LogJournal::Problem() const {
  std::lock_guard lock(mu_);
  return problem_;
}

uint64_t LogJournal::Rotate() {
  std::lock_guard lock(mu_);
  uint64_t segment = ++current_segment_;
  boundaries_.push_back({appended_lsn_, segment});
  segment_starts_.emplace_back(segment, appended_lsn_);
  flusher_kicked_ = true;
  work_cv_.notify_one();
  return segment;
}

uint64_t LogJournal::CurrentSegment() const {
  std::lock_guard lock(mu_);
  return current_segment_;
}

uint64_t LogJournal::BytesSince(uint64_t segment) const {
  std::lock_guard lock(mu_);
  for (const auto& [seg, lsn] : segment_starts_) {
    if (seg >= segment) return appended_lsn_ - lsn;
  }
  return 0;
}

JournalStats LogJournal::Stats() const {
  std::lock_guard lock(mu_);
  JournalStats s = stats_;
  s.segment = current_segment_;
  return s;
}

bool LogJournal::SyncAll(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  uint64_t target = appended_lsn_;
  sync_target_ = std::max(sync_target_, target);
  flusher_kicked_ = true;
  work_cv_.notify_one();
  return synced_cv_.wait_for(lock, timeout, [&] { return synced_lsn_ >= target; });
}

void LogJournal::SetProblem(int error, const char* what) {
  std::string text =
      fmt::format("{} {}/{}: {}", what, dir_, SegmentName(fd_segment_), ErrnoText(error));
  bool was_writable;
  {
    std::lock_guard lock(mu_);
    was_writable = writable_.exchange(false);
    problem_ = text;
  }
  if (was_writable) spdlog::error("log: {}; refusing changes until it can write again", text);
}

void LogJournal::Release(const void* loop, bool all) {
  std::vector<Waiter> ready;
  bool ok;
  uint64_t durable;
  {
    std::lock_guard lock(mu_);
    ok = writable_.load(std::memory_order_relaxed);
    durable = durable_lsn_.load(std::memory_order_relaxed);
    if (!ok) {
      ready.swap(waiters_);  // nothing more will be written for a while: every waiter hears now
    } else {
      auto split = std::partition(waiters_.begin(), waiters_.end(), [&](const Waiter& w) {
        return w.lsn > durable || (!all && w.loop != loop);
      });
      ready.assign(std::make_move_iterator(split), std::make_move_iterator(waiters_.end()));
      waiters_.erase(split, waiters_.end());
    }
  }
  for (auto& w : ready) w.fn(w.lsn <= durable);
}

int LogJournal::WriteOut(uint64_t batch_end_lsn) {
  while (!out_.empty() || !taken_boundaries_.empty()) {
    // Bytes before the next rotation go to the current segment.
    uint64_t stop = taken_boundaries_.empty() ? batch_end_lsn : taken_boundaries_.front().lsn;
    size_t chunk = static_cast<size_t>(stop - out_start_lsn_);
    if (chunk > 0) {
      size_t written = 0;
      int rc = WriteAll(fd_, std::string_view(out_).substr(0, chunk), written);
      out_.erase(0, written);
      out_start_lsn_ += written;
      if (written > 0) {
        unsynced_ = true;
        std::lock_guard lock(mu_);
        stats_.written_bytes += written;
        ++stats_.writes;
      }
      if (rc != 0) return rc;
    }
    if (taken_boundaries_.empty()) break;
    // A rotation: the old segment is finished and synced before the next one starts.
    if (int rc = SyncData(fd_); rc != 0) return rc;
    unsynced_ = false;
    if (int rc = OpenSegment(taken_boundaries_.front().segment); rc != 0) return rc;
    taken_boundaries_.erase(taken_boundaries_.begin());
  }
  return 0;
}

int LogJournal::WritePendingLocked(bool sync) {
  uint64_t batch_end;
  {
    std::lock_guard lock(mu_);
    out_.append(pending_);
    pending_.clear();
    batch_end = appended_lsn_;
    taken_boundaries_.insert(taken_boundaries_.end(), boundaries_.begin(), boundaries_.end());
    boundaries_.clear();
  }
  int rc = WriteOut(batch_end);
  if (rc == 0 && sync && unsynced_) {
    rc = SyncData(fd_);
    if (rc == 0) {
      unsynced_ = false;
      last_sync_ = std::chrono::steady_clock::now();
      std::lock_guard lock(mu_);
      ++stats_.syncs;
    }
  }
  if (rc != 0) {
    SetProblem(rc, failed_ ? "still cannot write" : "cannot write");
    failed_ = true;
    return rc;
  }
  std::lock_guard lock(mu_);
  if (failed_) {
    failed_ = false;
    problem_.clear();
    writable_.store(true, std::memory_order_release);
    spdlog::warn("log: writing again to {}/{}", dir_, SegmentName(fd_segment_));
  }
  // Under `always` only what is synced is durable; otherwise what the kernel has.
  uint64_t durable = policy_ == FsyncPolicy::kAlways && unsynced_
                         ? durable_lsn_.load(std::memory_order_relaxed)
                         : out_start_lsn_;
  if (durable > durable_lsn_.load(std::memory_order_relaxed)) {
    durable_lsn_.store(durable, std::memory_order_release);
  }
  if (!unsynced_ && out_start_lsn_ > synced_lsn_) {
    synced_lsn_ = out_start_lsn_;
    synced_cv_.notify_all();
  }
  return 0;
}

int LogJournal::SyncInBackground() {
  int fd;
  uint64_t upto;
  {
    std::lock_guard write(write_mu_);
    if (int rc = WritePendingLocked(false); rc != 0) return rc;
    upto = out_start_lsn_;
    if (!unsynced_) {
      std::lock_guard lock(mu_);
      synced_lsn_ = std::max(synced_lsn_, upto);
      synced_cv_.notify_all();
      return 0;
    }
    // A descriptor of its own: a rotation may close fd_ while this one syncs.
    fd = ::dup(fd_);
    if (fd < 0) return errno;
  }
  int rc = SyncData(fd);
  ::close(fd);
  std::lock_guard write(write_mu_);
  if (rc != 0) {
    SetProblem(rc, "cannot sync");
    failed_ = true;
    return rc;
  }
  if (out_start_lsn_ == upto) unsynced_ = false;  // nothing written meanwhile
  last_sync_ = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  ++stats_.syncs;
  synced_lsn_ = std::max(synced_lsn_, upto);
  if (policy_ == FsyncPolicy::kAlways && upto > durable_lsn_.load(std::memory_order_relaxed)) {
    durable_lsn_.store(upto, std::memory_order_release);
  }
  synced_cv_.notify_all();
  return 0;
}

// The journal's own thread: waiters of threads without a loop, SyncAll, rotations, records
// nobody waits for, everysec's sync, and retries after a failure.
void LogJournal::FlusherLoop() {
  auto next_tick = std::chrono::steady_clock::now() + kEverySec;
  while (true) {
    bool stopping, sync_requested;
    {
      std::unique_lock lock(mu_);
      auto wake = writable_.load(std::memory_order_relaxed)
                      ? next_tick
                      : std::chrono::steady_clock::now() + kRetryAfterFailure;
      work_cv_.wait_until(
          lock, wake, [&] { return stopping_ || flusher_kicked_ || sync_target_ > synced_lsn_; });
      flusher_kicked_ = false;
      stopping = stopping_;
      sync_requested = sync_target_ > synced_lsn_;
    }
    auto now = std::chrono::steady_clock::now();
    bool tick = now >= next_tick;
    int rc;
    {
      std::lock_guard write(write_mu_);
      rc = WritePendingLocked(false);
    }
    // `always` syncs whatever is written and unsynced (SyncInBackground does nothing when all
    // is), and answers every waiter it made safe, whichever thread queued it.
    const bool always = policy_ == FsyncPolicy::kAlways;
    if (rc == 0 &&
        (always || sync_requested || stopping || (tick && policy_ == FsyncPolicy::kEverySec))) {
      rc = SyncInBackground();
    }
    if (tick) next_tick = now + kEverySec;
    Release(nullptr, /*all=*/stopping || always);
    if (stopping) {
      std::lock_guard write(write_mu_);
      if (rc != 0 || !out_.empty()) {
        spdlog::error("log: stopping with {} bytes of changes that could not be written",
                      out_.size());
      }
      return;
    }
  }
}

}  // namespace anteroom::store::log
