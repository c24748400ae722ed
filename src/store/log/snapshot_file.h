#pragma once
// Snapshot files: the framing of record_format.h around the backend's state (SaveState), cut
// into records of about 1 MiB so a large state streams to disk, and closed by an end record
// (u64 number of state bytes) so a snapshot cut short is never mistaken for a whole one. A
// snapshot is written to a .tmp name, synced, and renamed: a file with the final name is whole.

#include <cstdint>
#include <functional>
#include <string>

#include "common/bytes.h"

namespace anteroom::store::log {

// Writes `save`'s output to `path` (created, synced). 0 or an errno value. Safe in a forked
// child: it takes no lock another thread could have held at fork time.
int WriteSnapshotFile(const std::string& path, uint64_t sequence,
                      const std::function<void(ByteWriter&)>& save);

// Reads and checks a snapshot; the state bytes in `state`, or false with "offset N: why"
// (or the I/O error) in `error`.
bool ReadSnapshotFile(const std::string& path, uint64_t sequence, std::string& state,
                      std::string& error);

}  // namespace anteroom::store::log
