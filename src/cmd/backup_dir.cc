#include "cmd/backup_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "store/log/embedded_store.h"
#include "store/log/file_io.h"

namespace anteroom::cmd {

namespace fs = std::filesystem;
using store::log::ErrnoText;

bool AbsentOrEmpty(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  return fs::is_directory(dir, ec) && fs::is_empty(dir, ec);
}

StagingDir::StagingDir(std::string final_dir) : final_(std::move(final_dir)) {
  while (final_.size() > 1 && final_.back() == '/') final_.pop_back();
  path_ = fmt::format("{}.tmp-{}", final_, ::getpid());
  std::error_code ec;
  fs::remove_all(path_, ec);  // a run of ours with the same pid that died
  if (!fs::create_directories(path_, ec) || ec) {
    throw std::runtime_error(fmt::format("{}: cannot create: {}", path_, ec.message()));
  }
  fs::permissions(path_, fs::perms::owner_all, ec);
}

StagingDir::~StagingDir() {
  if (published_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

int StagingDir::Create(const std::string& name) {
  std::string path = path_ + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: {}", path, ErrnoText(errno)));
  return fd;
}

void StagingDir::Write(const std::string& name, std::string_view content) {
  std::string path = path_ + "/" + name;
  int fd = Create(name);
  size_t written = 0;
  int rc = store::log::WriteAll(fd, content, written);
  if (rc == 0) rc = store::log::SyncData(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error(fmt::format("{}: cannot write: {}", path, ErrnoText(rc)));
}

void StagingDir::Publish() {
  if (int rc = store::log::SyncDir(path_); rc != 0) {
    throw std::runtime_error(fmt::format("{}: cannot sync: {}", path_, ErrnoText(rc)));
  }
  std::error_code ec;
  if (fs::exists(final_, ec)) {
    if (!AbsentOrEmpty(final_)) {
      throw std::runtime_error(fmt::format("{}: not empty (it was when we started)", final_));
    }
    fs::remove(final_, ec);  // an empty directory: rename() cannot replace it with ours
  }
  if (::rename(path_.c_str(), final_.c_str()) != 0) {
    throw std::runtime_error(
        fmt::format("{}: cannot rename to {}: {}", path_, final_, ErrnoText(errno)));
  }
  published_ = true;
  std::string parent = fs::path(final_).parent_path().string();
  store::log::SyncDir(parent.empty() ? "." : parent);
}

uint64_t RecoverBackup(const std::string& dir, store::MemoryBackend& backend) {
  store::log::RecoveryReport report;
  uint64_t next = store::log::Recover(dir, backend, /*repair=*/false, report);
  if (!report.warnings.empty()) {
    // A torn tail the server would truncate: a backup is whole or it is not one.
    throw std::runtime_error(report.warnings.front());
  }
  return next;
}

}  // namespace anteroom::cmd
