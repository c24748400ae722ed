#include "server/backup_exports.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>

#include "common/random_id.h"
#include "common/wire_errors.h"
#include "store/log/crc32c.h"
#include "store/log/data_dir.h"
#include "store/log/file_io.h"

namespace anteroom::server {

namespace {

using store::log::ErrnoText;

// The size and CRC-32C of an open file, read from its start; false with errno in `error`.
bool Measure(int fd, BackupFile& file, int& error) {
  std::string buffer(1u << 20, '\0');
  uint64_t offset = 0;
  uint32_t crc = 0;
  while (true) {
    ssize_t n = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      return false;
    }
    if (n == 0) break;
    crc = store::log::Crc32c(std::string_view(buffer.data(), static_cast<size_t>(n)), crc);
    offset += static_cast<uint64_t>(n);
  }
  file.bytes = offset;
  file.crc32c = crc;
  return true;
}

}  // namespace

BackupExports::BackupExports(store::log::EmbeddedStore& store)
    : store_(store), thread_([this] { Loop(); }) {}

BackupExports::~BackupExports() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& [id, open] : open_) Close(open);
}

void BackupExports::Close(Open& open) {
  for (int fd : open.fds) ::close(fd);
  open.fds.clear();
}

void BackupExports::ForgetIdle() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = open_.begin(); it != open_.end();) {
    if (now - it->second.used >= std::chrono::milliseconds(kIdleMs)) {
      spdlog::info("backup {}: forgotten after {} s without a read", it->first, kIdleMs / 1000);
      Close(it->second);
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
}

void BackupExports::Start(std::function<void(OpResult<BackupManifest>)> done) {
  bool stopping;
  {
    std::lock_guard lock(mu_);
    ForgetIdle();
    stopping = stopping_;
    if (!stopping && open_.size() + waiting_.size() < kMaxOpen) {
      waiting_.push_back(std::move(done));
      cv_.notify_all();
      return;
    }
  }
  if (stopping) return done({OpStatus::kUnavailable, std::string(wire::kBackupStopping)});
  done({OpStatus::kLimitReached, wire::TooManyBackups(kMaxOpen)});
}

void BackupExports::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
    if (stopping_) break;
    auto done = std::move(waiting_.front());
    waiting_.pop_front();
    lock.unlock();
    OpResult<BackupManifest> taken = Take();
    done(std::move(taken));
    lock.lock();
  }
  auto left = std::move(waiting_);
  lock.unlock();
  for (auto& done : left) done({OpStatus::kUnavailable, std::string(wire::kBackupStopping)});
}

OpResult<BackupManifest> BackupExports::Take() {
  Open open;
  open.manifest.id = NewRandomId();
  auto fail = [&](const std::string& why) -> OpResult<BackupManifest> {
    Close(open);
    spdlog::error("backup: {}", why);
    return {OpStatus::kUnavailable, wire::BackupFailed(why)};
  };
  const std::string& dir = store_.dir();
  // The key files first: they never change once made, and the snapshot is the larger wait.
  for (const char* name : kKeptFiles) {
    std::string path = dir + "/" + name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue;
    if (fd < 0) return fail(path + ": " + ErrnoText(errno));
    open.fds.push_back(fd);
    open.manifest.files.push_back({.name = name});
  }
  store::log::EmbeddedStore::HeldSnapshot held;
  std::string error;
  if (!store_.SnapshotAndHold(held, error)) {
    if (held.fd >= 0) ::close(held.fd);
    return fail(error);
  }
  open.fds.push_back(held.fd);
  open.manifest.files.push_back({.name = store::log::SnapshotName(held.snapshot)});
  open.manifest.snapshot = held.snapshot;
  open.manifest.cut_ms = held.cut_ms;
  for (size_t i = 0; i < open.fds.size(); ++i) {
    int read_error = 0;
    if (!Measure(open.fds[i], open.manifest.files[i], read_error)) {
      return fail(dir + "/" + open.manifest.files[i].name + ": " + ErrnoText(read_error));
    }
  }
  open.used = std::chrono::steady_clock::now();
  BackupManifest manifest = open.manifest;
  spdlog::info("backup {}: snapshot {} ({} bytes) held for the client", manifest.id,
               manifest.snapshot, manifest.files.back().bytes);
  std::lock_guard lock(mu_);
  open_.emplace(manifest.id, std::move(open));
  return manifest;
}

OpResult<std::string> BackupExports::Read(const std::string& id, const std::string& name,
                                          uint64_t offset, size_t max) {
  int fd = -1;
  uint64_t size = 0;
  {
    std::lock_guard lock(mu_);
    ForgetIdle();
    auto it = open_.find(id);
    if (it == open_.end())
      return {OpStatus::kUnknownBackup, wire::UnknownBackup(id, kIdleMs / 1000)};
    Open& open = it->second;
    open.used = std::chrono::steady_clock::now();
    for (size_t i = 0; i < open.manifest.files.size(); ++i) {
      if (open.manifest.files[i].name == name) {
        // A descriptor of its own: a Release meanwhile closes the backup's, not this read's.
        fd = ::dup(open.fds[i]);
        size = open.manifest.files[i].bytes;
        if (fd < 0) return {OpStatus::kInternal, name + ": " + ErrnoText(errno)};
      }
    }
    if (fd < 0) return {OpStatus::kUnknownBackup, wire::UnknownBackupFile(name)};
  }
  if (offset > size) {
    ::close(fd);
    return {OpStatus::kInvalidArgument, std::string(wire::kBackupOffset)};
  }
  std::string out(std::min<uint64_t>(std::min(max, kMaxChunk), size - offset), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      ::close(fd);
      return {OpStatus::kInternal, name + ": " + ErrnoText(e)};
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

OpResult<Done> BackupExports::Release(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return {OpStatus::kUnknownBackup, wire::UnknownBackup(id, kIdleMs / 1000)};
  Close(it->second);
  open_.erase(it);
  return Done{};
}

}  // namespace anteroom::server
