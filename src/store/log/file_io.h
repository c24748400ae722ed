#pragma once
// The few file operations the log and snapshots need, as plain POSIX calls that answer errno
// instead of throwing (a full disk is an expected condition on request paths).
//
// Fault injection for tests: when ANTEROOM_FAULT_DISK_FULL names a file and that file exists,
// every write and sync here fails with ENOSPC, as a full disk would. Tests prefer a real small
// tmpfs; this seam is for machines where mounting one is not allowed.

#include <cstdint>
#include <string>
#include <string_view>

namespace anteroom::store::log {

// 0 or an errno value.
int WriteAll(int fd, std::string_view data, size_t& written);
int SyncData(int fd);
int SyncDir(const std::string& dir);
// Reads a whole file; false with errno in `error` on failure.
bool ReadFile(const std::string& path, std::string& out, int& error);
std::string ErrnoText(int error);

}  // namespace anteroom::store::log
