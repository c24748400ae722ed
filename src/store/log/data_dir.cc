#include "store/log/data_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "common/random_id.h"
#include "store/log/file_io.h"
#include "store/log/record_format.h"

namespace anteroom::store::log {

std::string SegmentName(uint64_t segment) { return fmt::format("log-{:016d}.log", segment); }
std::string SnapshotName(uint64_t snapshot) { return fmt::format("snap-{:016d}.snap", snapshot); }

namespace {
bool ParseNumbered(const std::string& name, const char* prefix, const char* suffix, uint64_t& out) {
  std::string p(prefix), s(suffix);
  if (name.size() != p.size() + 16 + s.size()) return false;
  if (name.compare(0, p.size(), p) != 0 || name.compare(name.size() - s.size(), s.size(), s) != 0)
    return false;
  out = 0;
  for (size_t i = p.size(); i < p.size() + 16; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    out = out * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return true;
}
}  // namespace

DirListing ListDir(const std::string& dir) {
  DirListing out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    uint64_t n;
    if (ParseNumbered(name, "log-", ".log", n)) {
      out.segments.push_back(n);
    } else if (ParseNumbered(name, "snap-", ".snap", n)) {
      out.snapshots.push_back(n);
    } else if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      out.temporaries.push_back(name);
    }
  }
  std::sort(out.segments.begin(), out.segments.end());
  std::sort(out.snapshots.begin(), out.snapshots.end());
  return out;
}

DirLock::DirLock(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create: {}", dir, ec.message()));
  std::string path = dir + "/LOCK";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("{}: {}", path, ErrnoText(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    char pid[32] = {};
    ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      throw std::runtime_error(fmt::format(
          "data directory {} is locked by another process (pid {}); one process per directory", dir,
          holder));
    }
    throw std::runtime_error(fmt::format("{}: cannot lock: {}", path, ErrnoText(error)));
  }
  std::string me = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    size_t written;
    (void)WriteAll(fd_, me, written);
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::string LoadOrCreateSecret(const std::string& dir) {
  return LoadOrCreateFile(dir, "secret", [] { return RandomBytes(32); });
}

namespace {
// `content` as the file `name` of the directory: written beside it (mode 0600), synced, renamed
// into place, the directory synced, so a crash leaves the old file or the new one.
void ReplaceFile(const std::string& dir, const std::string& name, std::string_view content) {
  std::string path = dir + "/" + name;
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: {}", tmp, ErrnoText(errno)));
  size_t written;
  int rc = WriteAll(fd, content, written);
  if (rc == 0) rc = SyncData(fd);
  ::close(fd);
  if (rc != 0 || ::rename(tmp.c_str(), path.c_str()) != 0 || SyncDir(dir) != 0) {
    throw std::runtime_error(fmt::format("{}: cannot write: {}", path, ErrnoText(rc ? rc : errno)));
  }
}
}  // namespace

std::string LoadOrCreateFile(const std::string& dir, const std::string& name,
                             const std::function<std::string()>& make) {
  std::string path = dir + "/" + name;
  std::string content;
  int error = 0;
  if (ReadFile(path, content, error) && !content.empty()) return content;
  if (error != 0 && error != ENOENT) {
    throw std::runtime_error(fmt::format("{}: {}", path, ErrnoText(error)));
  }
  content = make();
  ReplaceFile(dir, name, content);
  return content;
}

namespace {
// The format version in the header of `path` (0: unreadable or too short to say).
uint32_t FileFormat(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char header[kFileHeaderBytes];
  ssize_t n = ::read(fd, header, sizeof header);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof header) ? HeaderVersion({header, sizeof header}) : 0;
}

[[noreturn]] void RefuseFormat(const std::string& dir, uint32_t found) {
  throw std::runtime_error(fmt::format(
      "data directory {} is in data format {}, written by an {} anteroom; this build reads "
      "formats {} to {}: run the anteroom that wrote it, or start this one on an empty directory",
      dir, found, found < kFormatVersion ? "older" : "newer", kOldestReadableFormat,
      kFormatVersion));
}
}  // namespace

void CheckDataFormat(const std::string& dir, const DirListing& files, bool mark) {
  std::string path = dir + "/" + kFormatFileName;
  std::string text;
  int error = 0;
  if (ReadFile(path, text, error)) {
    uint32_t found = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), found);
    if (ec != std::errc() || std::string_view(end, text.data() + text.size()) != "\n") {
      throw std::runtime_error(fmt::format("{}: not a data format mark", path));
    }
    if (!IsReadableFormat(found)) RefuseFormat(dir, found);
    // An older format this build reads: marked as this build's before anything is written in
    // this build's layouts, so the build that wrote it refuses it from now on.
    if (mark && found != kFormatVersion) {
      ReplaceFile(dir, kFormatFileName, fmt::format("{}\n", kFormatVersion));
    }
    return;
  }
  if (error != ENOENT) throw std::runtime_error(fmt::format("{}: {}", path, ErrnoText(error)));
  // No mark: what the files say (the newest snapshot's header, else the first segment's). A
  // header too short to say is left to recovery (a torn tail).
  std::string first;
  if (!files.snapshots.empty()) {
    first = SnapshotName(files.snapshots.back());
  } else if (!files.segments.empty()) {
    first = SegmentName(files.segments.front());
  }
  if (!first.empty()) {
    uint32_t found = FileFormat(dir + "/" + first);
    if (found != 0 && !IsReadableFormat(found)) RefuseFormat(dir, found);
  }
  if (mark) ReplaceFile(dir, kFormatFileName, fmt::format("{}\n", kFormatVersion));
}

}  // namespace anteroom::store::log
