#pragma once
// A directory `anteroom backup` writes and `anteroom restore` reads: the files of a data
// directory (data_dir.h) that hold the state at one point (the format mark, the secret and
// token keys when the server had them, one snapshot), and backup.json, which says what point
// that is. What both commands share: how a directory is built beside its final name and
// renamed into place, and how one is checked by recovering it, as the server would.

#include <cstdint>
#include <string>
#include <string_view>

#include "store/memory/memory_backend.h"

namespace anteroom::cmd {

inline constexpr char kBackupManifestName[] = "backup.json";

// Whether `dir` is absent or an empty directory (what backup and restore write into).
bool AbsentOrEmpty(const std::string& dir);

// A directory being built beside `final_dir` (FINAL.tmp-PID), removed unless Publish()ed.
// Throws std::runtime_error when it cannot be made.
class StagingDir {
 public:
  explicit StagingDir(std::string final_dir);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::string& path() const { return path_; }
  // Creates file `name` (mode 0600): the descriptor, for the caller to write, sync and close.
  int Create(const std::string& name);
  // Writes `content` as file `name` (mode 0600, synced).
  void Write(const std::string& name, std::string_view content);
  // Syncs it and renames it to the final name (which must be absent or empty), syncing the
  // parent: the final name then holds the whole directory or nothing. Throws on failure.
  void Publish();

 private:
  std::string final_;
  std::string path_;
  bool published_ = false;
};

// Recovers `dir` into `backend` (empty, not serving) without changing the directory, as
// `anteroom check-data` does. Throws std::runtime_error naming the file and offset on damage.
// Answers the number the next snapshot of this state takes (the next log segment).
uint64_t RecoverBackup(const std::string& dir, store::MemoryBackend& backend);

}  // namespace anteroom::cmd
