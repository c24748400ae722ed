#pragma once
// File descriptors: the connection cap must sit below what the process may open, or the
// accept loop meets EMFILE instead of the cap's polite 503 (and spun a core doing so).

#include <cstddef>

namespace anteroom::http {

// Descriptors kept for everything that is not a client connection: the data directory's log
// and snapshot files, Redis connections, the listener, compaction, connections refused over
// the cap while their 503 is written.
inline constexpr size_t kReservedFds = 1024;

struct FdFit {
  size_t soft_limit = 0;  // RLIMIT_NOFILE's soft limit after raising it
  size_t hard_limit = 0;
  size_t max_connections = 0;  // the cap to use
  bool clamped = false;        // the cap asked for did not fit
};

// Raises RLIMIT_NOFILE's soft limit to the hard limit, then fits `wanted` below it, keeping
// kReservedFds (a quarter of the limit when that is small). Logs what it did.
FdFit FitConnectionsToFds(size_t wanted);

// The cap that fits `wanted` under a soft limit of `soft_limit` descriptors.
size_t ConnectionsThatFit(size_t wanted, size_t soft_limit);

}  // namespace anteroom::http
