#include "store/log/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "store/log/data_dir.h"
#include "store/log/file_io.h"
#include "store/log/record_format.h"

namespace anteroom::store::log {

namespace {
constexpr auto kRetryAfterFailure = std::chrono::milliseconds(100);
constexpr auto kEverySec = std::chrono::seconds(1);
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
    : dir_(std::move(dir)), policy_(policy), current_segment_(segment) {
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
  std::lock_guard lock(mu_);
  size_t before = pending_.size();
  AppendRecord(pending_, record);
  appended_lsn_ += pending_.size() - before;
  stats_.appended_bytes += pending_.size() - before;
  if (flusher_waiting_) {
    flusher_waiting_ = false;
    work_cv_.notify_one();
  }
  return appended_lsn_;
}

void LogJournal::WhenDurable(uint64_t lsn, std::function<void(bool)> fn) {
  bool now_ok = false, now_failed = false;
  {
    std::lock_guard lock(mu_);
    if (lsn <= durable_lsn_.load(std::memory_order_relaxed)) {
      now_ok = true;
    } else if (!writable_.load(std::memory_order_relaxed)) {
      now_failed = true;
    } else {
      waiters_.push_back({lsn, std::move(fn)});
      return;
    }
  }
  if (now_ok) fn(true);
  if (now_failed) fn(false);
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
  flusher_waiting_ = false;
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
  flusher_waiting_ = false;
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

// Answers the waiters up to `durable` (ok), or every waiter (failed).
void LogJournal::Release(uint64_t durable, bool ok) {
  std::vector<Waiter> ready;
  {
    std::lock_guard lock(mu_);
    if (ok) {
      durable_lsn_.store(durable, std::memory_order_release);
      auto split = std::partition(waiters_.begin(), waiters_.end(),
                                  [&](const Waiter& w) { return w.lsn > durable; });
      ready.assign(std::make_move_iterator(split), std::make_move_iterator(waiters_.end()));
      waiters_.erase(split, waiters_.end());
    } else {
      ready.swap(waiters_);
    }
  }
  for (auto& w : ready) w.fn(ok);
}

int LogJournal::WriteOut(uint64_t batch_end_lsn, std::vector<Boundary>& boundaries) {
  while (!out_.empty() || !boundaries.empty()) {
    // Bytes before the next rotation go to the current segment.
    uint64_t stop = boundaries.empty() ? batch_end_lsn : boundaries.front().lsn;
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
    if (boundaries.empty()) break;
    // A rotation: the old segment is finished and synced before the next one starts.
    if (int rc = SyncData(fd_); rc != 0) return rc;
    unsynced_ = false;
    if (int rc = OpenSegment(boundaries.front().segment); rc != 0) return rc;
    boundaries.erase(boundaries.begin());
  }
  return 0;
}

void LogJournal::FlusherLoop() {
  std::vector<Boundary> boundaries;
  bool failed = false;
  while (true) {
    uint64_t batch_end;
    bool stopping, sync_requested;
    {
      std::unique_lock lock(mu_);
      auto due = [&] {
        return stopping_ || !pending_.empty() || !boundaries_.empty() ||
               sync_target_ > synced_lsn_ || failed ||
               (policy_ == FsyncPolicy::kEverySec && unsynced_);
      };
      if (!due()) {
        flusher_waiting_ = true;
        work_cv_.wait(lock, [&] { return !flusher_waiting_ || stopping_; });
        flusher_waiting_ = false;
      }
      if (failed) {
        lock.unlock();
        std::this_thread::sleep_for(kRetryAfterFailure);
        lock.lock();
      } else if (policy_ == FsyncPolicy::kEverySec && unsynced_ && pending_.empty() && !stopping_ &&
                 sync_target_ <= synced_lsn_ && boundaries_.empty()) {
        // Nothing to write: sleep until the next second's sync, unless records arrive.
        flusher_waiting_ = true;
        work_cv_.wait_until(lock, last_sync_ + kEverySec,
                            [&] { return !flusher_waiting_ || stopping_; });
        flusher_waiting_ = false;
      }
      out_.append(pending_);
      pending_.clear();
      batch_end = appended_lsn_;
      boundaries.insert(boundaries.end(), boundaries_.begin(), boundaries_.end());
      boundaries_.clear();
      stopping = stopping_;
      sync_requested = sync_target_ > synced_lsn_;
    }
    if (out_.empty() && boundaries.empty() && !unsynced_ && !failed) {
      if (sync_requested) {
        std::lock_guard lock(mu_);
        synced_lsn_ = std::max(synced_lsn_, batch_end);
        synced_cv_.notify_all();
      }
      if (stopping) return;
      continue;
    }

    int rc = WriteOut(batch_end, boundaries);
    bool sync_now = policy_ == FsyncPolicy::kAlways || sync_requested || stopping ||
                    (policy_ == FsyncPolicy::kEverySec &&
                     std::chrono::steady_clock::now() - last_sync_ >= kEverySec);
    if (rc == 0 && unsynced_ && sync_now) {
      rc = SyncData(fd_);
      if (rc == 0) {
        unsynced_ = false;
        last_sync_ = std::chrono::steady_clock::now();
        std::lock_guard lock(mu_);
        ++stats_.syncs;
      }
    }
    if (rc != 0) {
      SetProblem(rc, failed ? "still cannot write" : "cannot write");
      failed = true;
      Release(0, false);
      if (stopping) {
        spdlog::error("log: stopping with {} bytes of changes that could not be written",
                      out_.size());
        return;
      }
      continue;
    }
    if (failed) {
      failed = false;
      {
        std::lock_guard lock(mu_);
        problem_.clear();
        writable_.store(true, std::memory_order_release);
      }
      spdlog::warn("log: writing again to {}/{}", dir_, SegmentName(fd_segment_));
    }
    uint64_t durable =
        policy_ == FsyncPolicy::kAlways && unsynced_ ? durable_lsn_.load() : out_start_lsn_;
    Release(durable, true);
    if (!unsynced_) {
      std::lock_guard lock(mu_);
      synced_lsn_ = std::max(synced_lsn_, out_start_lsn_);
      synced_cv_.notify_all();
    }
    if (stopping && out_.empty()) return;
  }
}

}  // namespace anteroom::store::log
