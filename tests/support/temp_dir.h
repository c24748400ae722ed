#pragma once
// Test support: scratch files for tests that talk to the processes they start through files
// (logs, hold files, outputs).

#include <filesystem>
#include <string>
#include <string_view>

namespace anteroom::testing {

// A fresh directory under the temp dir (named PREFIX-XXXXXX, so a leftover one says which test
// made it), removed with everything in it. path() is empty if it could not be made (errno
// tells why): check it before use.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The whole file, byte for byte; empty if it does not exist (a file a process has not written
// yet reads as empty rather than failing the test).
std::string ReadFile(const std::filesystem::path& path);

// The last `bytes` of text (with "..." in front when cut), so a failure message shows the end
// of a long log.
std::string Tail(const std::string& text, size_t bytes = 3000);

}  // namespace anteroom::testing
