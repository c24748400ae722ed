#pragma once
// The on-disk framing shared by log segments and snapshots, and the data format's version.
//
// A file is a header followed by records:
//
//   header (32 bytes): "anteroom" | u32 kind ("LOG1" or "SNP1" as bytes) | u32 version (6)
//                      | u64 sequence (the segment's or snapshot's number) | u32 reserved (0)
//                      | u32 crc32c of the 28 bytes before it
//   record:            u32 length | u32 crc32c(payload) | u32 crc32c(the 8 bytes before it)
//                      | payload (length bytes)
//
// All integers are little-endian. The header checksum covers the length, so a damaged length
// is caught before it is believed; the payload checksum covers the rest.
//
// Reading (Scan) tells three endings apart:
//  - clean: the last record ends exactly at the end of the file;
//  - torn tail: a record fails its checks (or runs past the end) and no valid record starts
//    anywhere after it: a crash cut the last write short. Recovery truncates it, with a warning;
//  - damage: a record fails its checks but a valid record starts later in the file, so data
//    after the failure would be lost by truncating. Recovery refuses to start and names the file
//    and the offset of the bad record.
//
// kFormatVersion is the version of everything in a data directory: this framing, the change
// records (store/memory/change_record.h) and the snapshots' layouts (memory_state.cc,
// core/*_snapshot.cc). Changing any of them is a new version. A build reads its own version and
// the released ones before it back to kOldestReadableFormat, and marks such a directory with its
// own version before it writes (so an older build then refuses it rather than misread it); any
// other version is refused at start with one line (data_dir.h CheckDataFormat), never read.
// How a newer layout tells an older one apart: a room snapshot carries its own layout number
// (core/room_snapshot.cc), and a record gains fields only at its end, read when bytes remain.
// Versions 1 to 3 were development formats, never released. 4 added the launch-day state
// (events, pre-queue, draws, queueing methods); 5 a room's page settings, at the end of a room
// patch and of a room's snapshot; 6 config entries (webhooks): a record kind (SetConfigRecord)
// and a section at the end of the state snapshot, and the ETA's flow histories in a room's
// snapshot (its layout 3, core/room_snapshot.cc), and notify_at_position at the end of a room
// patch and of a room's snapshot. 7 queue groups and limits: record kinds (SnoozeRecord,
// SetQueueSettingsRecord), jobs' groups at the end of a push record, and a queue's snapshot in
// its layout 2 (core/queue_snapshot.cc). 8 schedules of repeatable jobs: record kinds
// (PutScheduleRecord, DeleteScheduleRecord, FireScheduleRecord) and a section at the end of the
// state snapshot. 9 job state: record kinds (SetProgressRecord, AppendJobLogRecord), results at
// the end of an ack record and keep_acked at the end of a settings record, and a queue's
// snapshot in its layout 3 (core/queue_snapshot.cc).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace anteroom::store::log {

inline constexpr uint32_t kFormatVersion = 9;
inline constexpr uint32_t kOldestReadableFormat = 4;
inline constexpr bool IsReadableFormat(uint32_t v) {
  return v >= kOldestReadableFormat && v <= kFormatVersion;
}
inline constexpr size_t kFileHeaderBytes = 32;
inline constexpr size_t kRecordHeaderBytes = 12;
// Larger lengths are damage: a log record is one change (a push batch is at most 16 MiB of
// request), a snapshot record one chunk.
inline constexpr uint32_t kMaxRecordBytes = 64u << 20;

enum class FileKind : uint32_t {
  kLog = 0x31474f4c /* "LOG1" */,
  kSnapshot = 0x31504e53 /* "SNP1" */
};

std::string FileHeader(FileKind kind, uint64_t sequence, uint32_t version = kFormatVersion);
// The format version a whole, undamaged header claims (0: too short or damaged, so it says
// nothing). Scan checks it; CheckDataFormat reads it where a directory has no format mark.
uint32_t HeaderVersion(std::string_view data);
// Appends one framed record holding `payload` to `out`.
void AppendRecord(std::string& out, std::string_view payload);

struct ScanResult {
  enum class End { kClean, kTornTail, kDamaged };
  End end = End::kClean;
  uint64_t sequence = 0;   // from the header
  size_t valid_bytes = 0;  // where the last good record ends (the length to truncate to)
  size_t bad_offset = 0;   // torn or damaged: where the bad part starts
  std::string problem;     // torn or damaged: what is wrong there
  size_t records = 0;
};

// Checks the header and walks the records of `data` (a whole file), calling on_record(payload,
// offset) for each good one; stops early when it answers false (then problem is its reason).
ScanResult Scan(std::string_view data, FileKind kind,
                const std::function<bool(std::string_view, size_t, std::string&)>& on_record);

}  // namespace anteroom::store::log
