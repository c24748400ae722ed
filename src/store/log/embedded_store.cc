#include "store/log/embedded_store.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <stdexcept>

#include "store/log/file_io.h"
#include "store/log/record_format.h"
#include "store/log/snapshot_file.h"

namespace anteroom::store::log {

namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

[[noreturn]] void Damaged(const std::string& path, size_t offset, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: offset {}: {}", path, offset, what));
}

void RemoveFile(const std::string& path, RecoveryReport& report, const char* why) {
  if (::unlink(path.c_str()) == 0) report.warnings.push_back(fmt::format("{}: {}", path, why));
}

// Replays one segment; answers false when it was removed (a torn header: nothing in it).
bool ReplaySegment(const std::string& dir, uint64_t segment, bool last, MemoryBackend& backend,
                   bool repair, RecoveryReport& report) {
  std::string path = dir + "/" + SegmentName(segment);
  std::string data;
  int error = 0;
  if (!ReadFile(path, data, error)) {
    throw std::runtime_error(fmt::format("{}: {}", path, ErrnoText(error)));
  }
  ScanResult scan =
      Scan(data, FileKind::kLog, [&](std::string_view record, size_t, std::string& why) {
        OpResult<Done> applied = backend.Replay(record);
        if (!applied.ok()) why = applied.message();
        return applied.ok();
      });
  report.records += scan.records;
  report.log_bytes += scan.valid_bytes;
  report.segments.push_back(segment);
  if (scan.end == ScanResult::End::kClean && scan.sequence != segment) {
    Damaged(path, 16, fmt::format("segment number {} does not match its name", scan.sequence));
  }
  if (scan.end == ScanResult::End::kDamaged) Damaged(path, scan.bad_offset, scan.problem);
  if (scan.end == ScanResult::End::kTornTail) {
    if (!last) {
      Damaged(path, scan.bad_offset, scan.problem + " (and later segments exist)");
    }
    // Not even a whole header: the crash came as the segment was being created.
    bool remove = scan.valid_bytes < kFileHeaderBytes;
    const char* action = remove ? (repair ? "the segment was removed" : "would be removed at start")
                                : (repair ? "truncated" : "would be truncated at start");
    report.warnings.push_back(fmt::format("{}: offset {}: torn tail ({}): {} bytes {}", path,
                                          scan.bad_offset, scan.problem,
                                          data.size() - scan.valid_bytes, action));
    if (repair && remove) {
      if (::unlink(path.c_str()) != 0) {
        throw std::runtime_error(fmt::format("{}: cannot remove: {}", path, ErrnoText(errno)));
      }
      report.segments.pop_back();
      return false;
    }
    if (repair && ::truncate(path.c_str(), static_cast<off_t>(scan.valid_bytes)) != 0) {
      throw std::runtime_error(fmt::format("{}: cannot truncate: {}", path, ErrnoText(errno)));
    }
  }
  return true;
}

}  // namespace

uint64_t Recover(const std::string& dir, MemoryBackend& backend, bool repair,
                 RecoveryReport& report) {
  auto start = SteadyClock::now();
  DirListing files = ListDir(dir);
  CheckDataFormat(dir, files, /*mark=*/repair);
  backend.StartReplay();
  if (repair) {
    for (const auto& tmp : files.temporaries) {
      RemoveFile(dir + "/" + tmp, report, "unfinished snapshot removed");
    }
  }
  uint64_t first = 1;
  if (!files.snapshots.empty()) {
    uint64_t snap = files.snapshots.back();
    std::string path = dir + "/" + SnapshotName(snap);
    std::string state, error;
    if (!ReadSnapshotFile(path, snap, state, error)) {
      throw std::runtime_error(fmt::format("{}: {}", path, error));
    }
    ByteReader in(state);
    if (!backend.LoadState(in)) {
      Damaged(path, kFileHeaderBytes, "the snapshot's state does not decode");
    }
    report.snapshot = snap;
    report.snapshot_bytes = state.size();
    first = snap;
  }
  std::vector<uint64_t> replay;
  for (uint64_t seg : files.segments) {
    if (seg < first) {
      if (repair) RemoveFile(dir + "/" + SegmentName(seg), report, "replaced by a snapshot");
    } else {
      replay.push_back(seg);
    }
  }
  if (!replay.empty() && replay.front() != first) {
    if (report.snapshot == 0) {
      throw std::runtime_error(fmt::format(
          "{}/{}: missing: the log starts at segment {}, so the state before it must come "
          "from that snapshot",
          dir, SnapshotName(replay.front()), replay.front()));
    }
    throw std::runtime_error(fmt::format("{}/{}: missing: snapshot {} is followed by it", dir,
                                         SegmentName(first), first));
  }
  for (size_t i = 0; i < replay.size(); ++i) {
    if (i > 0 && replay[i] != replay[i - 1] + 1) {
      throw std::runtime_error(fmt::format("{}/{}: missing: segments {} and {} exist", dir,
                                           SegmentName(replay[i - 1] + 1), replay[i - 1],
                                           replay[i]));
    }
    if (!ReplaySegment(dir, replay[i], i + 1 == replay.size(), backend, repair, report)) {
      report.seconds = SecondsSince(start);
      return replay[i];  // removed: the next segment takes its number, keeping them contiguous
    }
  }
  report.seconds = SecondsSince(start);
  return replay.empty() ? first : replay.back() + 1;
}

EmbeddedStore::EmbeddedStore(MemoryBackend& backend, EmbeddedOptions options)
    : backend_(backend), options_(std::move(options)), lock_(options_.dir) {
  uint64_t next = Recover(options_.dir, backend_, /*repair=*/true, report_);
  for (const auto& w : report_.warnings) spdlog::warn("recovery: {}", w);
  snapshot_ = report_.snapshot;
  snapshot_bytes_ = report_.snapshot_bytes;
  inherited_log_bytes_ = report_.log_bytes;
  journal_ = std::make_unique<LogJournal>(options_.dir, options_.fsync, next);
  backend_.FinishRecovery();
  // The journal first: from the moment deadlines are in the timer's schedule, what the timer
  // does (a schedule's firing above all, which a replay does not redo from the time) is logged.
  backend_.AttachJournal(journal_.get());
  backend_.ScheduleAll();
  if (options_.compact_in_background) loop_ = std::thread([this] { CompactionLoop(); });
}

EmbeddedStore::~EmbeddedStore() {
  backend_.StopTimer();  // nothing may reach the journal once it is gone
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (!journal_->SyncAll(std::chrono::seconds(5))) {
    spdlog::error("log: could not sync the last changes before stopping: {}", journal_->Problem());
  }
  backend_.AttachJournal(nullptr);
}

EmbeddedStore::CompactionStats EmbeddedStore::compaction_stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

void EmbeddedStore::RequestCompaction() {
  {
    std::lock_guard lock(loop_mu_);
    requested_ = true;
  }
  loop_cv_.notify_all();
}

void EmbeddedStore::CompactionLoop() {
  std::unique_lock lock(loop_mu_);
  auto retry_at = SteadyClock::now();
  while (!stopping_) {
    loop_cv_.wait_for(lock, std::chrono::milliseconds(200),
                      [&] { return stopping_ || requested_; });
    if (stopping_) break;
    uint64_t threshold = std::max(options_.compact_min_bytes, 2 * snapshot_bytes_);
    bool due = requested_ ||
               inherited_log_bytes_ + journal_->BytesSince(snapshot_ ? snapshot_ : 1) >= threshold;
    if (!due || SteadyClock::now() < retry_at || !journal_->Writable()) continue;
    requested_ = false;
    lock.unlock();
    std::string error;
    bool ok = Compact(error);
    lock.lock();
    if (!ok) {
      spdlog::error("compaction: {}; trying again in 10 s", error);
      retry_at = SteadyClock::now() + std::chrono::seconds(10);
    }
  }
}

void EmbeddedStore::WriteSnapshotInChild(const std::string& tmp, uint64_t segment, pid_t parent) {
  // The state as it was at the cut. Only this thread exists here; it takes no lock and closes
  // every inherited descriptor (sockets must not outlive the parent's close).
  ::syscall(SYS_close_range, 3u, ~0u, 0u);
  // It must not outlive the server (a killed server's child would be an orphan), nor hold the
  // server's stdout/stderr (whoever reads them waits for their end).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  if (int null = ::open("/dev/null", O_RDWR); null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    if (null > 2) ::close(null);
  }
  int rc = WriteSnapshotFile(tmp, segment, [&](ByteWriter& out) { backend_.SaveState(out); });
  ::_exit(rc == 0 ? 0 : (rc & 0x7f) + 1);
}

bool EmbeddedStore::Compact(std::string& error) {
  std::lock_guard one_at_a_time(compact_mu_);
  HeldSnapshot made;
  return CompactLocked(error, made);
}

bool EmbeddedStore::SnapshotAndHold(HeldSnapshot& held, std::string& error) {
  std::lock_guard one_at_a_time(compact_mu_);  // no compaction deletes it before it is open
  if (!CompactLocked(error, held)) return false;
  std::string path = options_.dir + "/" + SnapshotName(held.snapshot);
  held.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (held.fd < 0) {
    error = path + ": " + ErrnoText(errno);
    return false;
  }
  return true;
}

bool EmbeddedStore::CompactLocked(std::string& error, HeldSnapshot& made) {
  auto start = SteadyClock::now();
  uint64_t segment;
  std::string tmp;  // where the snapshot is written before it is published
  pid_t pid = 0;    // the forked writer; 0 when this process writes
  int fork_errno = 0;
  std::string state;  // the copy, when this process writes
  double pause_ms;
  {
    std::unique_lock world(backend_.world());  // no change half made while we cut
    auto paused = SteadyClock::now();
    segment = journal_->Rotate();
    made.snapshot = segment;
    made.cut_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    tmp = options_.dir + "/" + SnapshotName(segment) + ".tmp";
    if (options_.snapshot_writer == SnapshotWriter::kForkedChild) {
      const pid_t parent = ::getpid();
      pid = options_.fork();
      if (pid == 0) WriteSnapshotInChild(tmp, segment, parent);  // never returns
      if (pid < 0) fork_errno = errno;
    }
    if (pid <= 0) {
      ByteWriter out(state);
      backend_.SaveState(out);
    }
    pause_ms = SecondsSince(paused) * 1000;
  }
  if (fork_errno != 0) {
    spdlog::warn(
        "compaction: fork: {}; the state was copied in this process instead (paused {:.1f} ms)",
        ErrnoText(fork_errno), pause_ms);
  }
  if (pid <= 0) {
    int rc = WriteSnapshotFile(tmp, segment, [&](ByteWriter& out) { out.PutBytes(state); });
    std::string().swap(state);  // a copy of the whole state: give it back now
    if (rc != 0) {
      ::unlink(tmp.c_str());
      error = "writing " + tmp + ": " + ErrnoText(rc);
      return false;
    }
  } else {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ::unlink(tmp.c_str());
      error = WIFEXITED(status) ? "writing " + tmp + ": " + ErrnoText(WEXITSTATUS(status) - 1)
                                : "the snapshot writer died";
      return false;
    }
  }
  std::string final_path = options_.dir + "/" + SnapshotName(segment);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0 || SyncDir(options_.dir) != 0) {
    error = "publishing " + final_path + ": " + ErrnoText(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  struct stat st;
  uint64_t bytes = ::stat(final_path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  // Everything before the new snapshot is now redundant.
  DirListing files = ListDir(options_.dir);
  for (uint64_t s : files.snapshots) {
    if (s < segment) ::unlink((options_.dir + "/" + SnapshotName(s)).c_str());
  }
  for (uint64_t s : files.segments) {
    if (s < segment) ::unlink((options_.dir + "/" + SegmentName(s)).c_str());
  }
  SyncDir(options_.dir);
  snapshot_ = segment;
  snapshot_bytes_ = bytes;
  inherited_log_bytes_ = 0;
  std::lock_guard lock(stats_mu_);
  ++stats_.compactions;
  stats_.last_pause_ms = pause_ms;
  if (pid <= 0) ++stats_.written_here;
  stats_.last_fork_error = fork_errno != 0 ? ErrnoText(fork_errno) : "";
  stats_.last_seconds = SecondsSince(start);
  stats_.last_snapshot_bytes = bytes;
  spdlog::info("compaction: snapshot {} ({} bytes) in {:.3f} s, paused {:.2f} ms", segment, bytes,
               stats_.last_seconds, pause_ms);
  return true;
}

}  // namespace anteroom::store::log
