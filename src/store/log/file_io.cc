#include "store/log/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/histogram.h"

namespace anteroom::store::log {

namespace {
bool InjectedDiskFull() {
  const char* flag = std::getenv("ANTEROOM_FAULT_DISK_FULL");  // read each time: tests toggle it
  if (flag == nullptr || *flag == '\0') return false;
  struct stat st;
  return ::stat(flag, &st) == 0;
}
}  // namespace

int WriteAll(int fd, std::string_view data, size_t& written) {
  written = 0;
  while (written < data.size()) {
    if (InjectedDiskFull()) return ENOSPC;
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    written += static_cast<size_t>(n);
  }
  return 0;
}

int SyncData(int fd) {
  EngineMetrics& metrics = ProcessEngineMetrics();
  if (InjectedDiskFull()) {
    metrics.log_fsync_errors.fetch_add(1, std::memory_order_relaxed);
    return ENOSPC;
  }
  // Real elapsed time, not the injected clock: an fsync's cost is the disk's, and it is
  // measured in microseconds, below the clock's millisecond.
  auto start = std::chrono::steady_clock::now();
  int rc = 0;
  while (::fdatasync(fd) != 0) {
    if (errno != EINTR) {
      rc = errno;
      break;
    }
  }
  metrics.log_fsync.ObserveNs(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  if (rc != 0) metrics.log_fsync_errors.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

int SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

bool ReadFile(const std::string& path, std::string& out, int& error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = errno;
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    error = errno;
    ::close(fd);
    return false;
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  ::close(fd);
  return true;
}

std::string ErrnoText(int error) { return std::strerror(error); }

}  // namespace anteroom::store::log
