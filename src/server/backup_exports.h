#pragma once
// The backups clients take of this process's data directory (server/backup_family.cc): each a
// snapshot written for it at a cut of the log, with the directory's files that tokens and
// leases need (the format mark, the secret, the token signing keys), held open until the client
// has read them or, after kIdleMs without a read, forgotten. Holding the descriptors is what
// lets a compaction delete the snapshot meanwhile without cutting the transfer short.
//
// The snapshot is written on a thread of this object's own (the request answers when it is
// whole), one backup at a time: requests go on being answered, paused only for the fork.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/op_status.h"
#include "store/log/embedded_store.h"

namespace anteroom::server {

struct BackupFile {
  std::string name;  // its name in a data directory
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // CRC-32C of the whole file (store/log/crc32c.h)
};

// What a backup holds: the state as of `snapshot`'s cut, `cut_ms` (wall time).
struct BackupManifest {
  std::string id;
  uint64_t snapshot = 0;
  int64_t cut_ms = 0;
  std::vector<BackupFile> files;
};

class BackupExports {
 public:
  static constexpr size_t kMaxOpen = 4;
  static constexpr int64_t kIdleMs = 5 * 60 * 1000;
  static constexpr size_t kMaxChunk = 8u << 20;
  // The files besides the snapshot, taken when present (data_dir.h).
  static constexpr const char* kKeptFiles[] = {"format", "secret", "token-eddsa.pem",
                                               "token-es256.pem"};

  explicit BackupExports(store::log::EmbeddedStore& store);
  // Answers what is still waiting (kUnavailable), waits for the snapshot being written, closes
  // every file.
  ~BackupExports();
  BackupExports(const BackupExports&) = delete;
  BackupExports& operator=(const BackupExports&) = delete;

  // Takes a backup; `done` runs on this object's thread once its snapshot is whole (kLimitReached
  // while kMaxOpen are open, at once).
  void Start(std::function<void(OpResult<BackupManifest>)> done);
  // Up to `max` (at most kMaxChunk) bytes of file `name` of backup `id`, from `offset`.
  OpResult<std::string> Read(const std::string& id, const std::string& name, uint64_t offset,
                             size_t max);
  // Closes the backup's files (kNotFound when there is no such backup).
  OpResult<Done> Release(const std::string& id);

 private:
  struct Open {
    BackupManifest manifest;
    std::vector<int> fds;  // one per manifest.files entry
    std::chrono::steady_clock::time_point used;
  };
  void Loop();
  OpResult<BackupManifest> Take();
  // Closes the backups idle for kIdleMs or more (mu_ held).
  void ForgetIdle();
  static void Close(Open& open);

  store::log::EmbeddedStore& store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::function<void(OpResult<BackupManifest>)>> waiting_;  // guarded by mu_
  std::map<std::string, Open> open_;                                   // guarded by mu_
  std::thread thread_;
};

}  // namespace anteroom::server
