#pragma once
// The data directory of the embedded backend:
//
//   LOCK                   flock()ed by the one process using the directory (holds its pid)
//   format                 the data format of everything here ("3\n"; record_format.h)
//   secret                 the token and lease secret, when ANTEROOM_TOKEN_SECRET is not set
//   token-eddsa.pem        the EdDSA (Ed25519) token signing key, with --token-alg EdDSA and no
//   token-es256.pem        --token-key (or the ES256 P-256 one); PKCS#8 PEM, mode 0600
//   snap-NNNNNNNNNNNNNNNN.snap   a snapshot: the state before segment N
//   log-NNNNNNNNNNNNNNNN.log     log segment N: changes after snapshot N (or from the start)
//
// Recovery loads the newest snapshot S (if any) and replays segments S, S+1, ... in order; they
// must be contiguous. Without a snapshot, segments must start at 1: a log that starts later
// means its snapshot is missing, and start-up refuses. Files older than the newest snapshot are
// leftovers of a compaction that was cut short, and are deleted.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace anteroom::store::log {

std::string SegmentName(uint64_t segment);
std::string SnapshotName(uint64_t snapshot);

struct DirListing {
  std::vector<uint64_t> segments;        // ascending
  std::vector<uint64_t> snapshots;       // ascending
  std::vector<std::string> temporaries;  // *.tmp: snapshots never finished
};
DirListing ListDir(const std::string& dir);

inline constexpr char kFormatFileName[] = "format";
// Throws, with one line saying what the directory is and what to do, when its data format is
// not one this build reads (the `format` mark, or without one the files' headers): a directory
// of another format is refused, never misread. With `mark`, the directory is marked with this
// build's format (one with no mark, or of an older format this build reads).
void CheckDataFormat(const std::string& dir, const DirListing& files, bool mark);

// Holds the directory's lock for its lifetime. Throws (at start-up) if the directory cannot be
// created or another process holds the lock (naming its pid).
class DirLock {
 public:
  explicit DirLock(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// The secret kept in the directory (created with mode 0600 on first use).
std::string LoadOrCreateSecret(const std::string& dir);
// The file `name` of the directory, or, when it is missing or empty, `make()` written there
// first (mode 0600, synced, renamed into place).
std::string LoadOrCreateFile(const std::string& dir, const std::string& name,
                             const std::function<std::string()>& make);

}  // namespace anteroom::store::log
