#include "store/log/snapshot_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>
#include <utility>
#include <vector>

#include "store/log/file_io.h"
#include "store/log/record_format.h"

namespace anteroom::store::log {

namespace {
constexpr size_t kChunkBytes = 1 << 20;
constexpr std::string_view kEndMarker = "anteroom-snapshot-end";
}  // namespace

int WriteSnapshotFile(const std::string& path, uint64_t sequence,
                      const std::function<void(ByteWriter&)>& save) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int rc = 0;
  uint64_t total = 0;
  std::string framed = FileHeader(FileKind::kSnapshot, sequence);
  auto write_framed = [&] {
    size_t written;
    if (rc == 0) rc = WriteAll(fd, framed, written);
    framed.clear();
  };
  write_framed();
  std::string buffer;
  buffer.reserve(kChunkBytes + 4096);
  ByteWriter out(buffer);
  out.SetSpill(kChunkBytes, [&](std::string& chunk) {
    total += chunk.size();
    AppendRecord(framed, chunk);
    chunk.clear();
    write_framed();
  });
  save(out);
  out.Flush();
  std::string end(kEndMarker);
  end.append(reinterpret_cast<const char*>(&total), sizeof total);
  AppendRecord(framed, end);
  write_framed();
  if (rc == 0) rc = SyncData(fd);
  ::close(fd);
  return rc;
}

bool ReadSnapshotFile(const std::string& path, uint64_t sequence, std::string& state,
                      std::string& error) {
  // The file is read into `state` itself and the payloads are then moved together in place:
  // one buffer, no second copy of a state that may be hundreds of megabytes.
  int io_error = 0;
  if (!ReadFile(path, state, io_error)) {
    error = ErrnoText(io_error);
    return false;
  }
  // (offset in the file, length) of every record. The end record is the last one, whatever the
  // state's bytes: a chunk of state that happens to spell the end marker is still state.
  std::vector<std::pair<size_t, size_t>> chunks;
  ScanResult scan =
      Scan(state, FileKind::kSnapshot, [&](std::string_view payload, size_t, std::string&) {
        chunks.emplace_back(payload.data() - state.data(), payload.size());
        return true;
      });
  bool ended = false;
  uint64_t announced = 0;
  if (!chunks.empty()) {
    std::string_view last(state.data() + chunks.back().first, chunks.back().second);
    if (last.size() == kEndMarker.size() + 8 && last.substr(0, kEndMarker.size()) == kEndMarker) {
      std::memcpy(&announced, last.data() + kEndMarker.size(), 8);
      ended = true;
      chunks.pop_back();
    }
  }
  // Not ended: say so precisely when an end record came earlier, its size right, and records
  // followed it (a file appended to after it was written).
  size_t data_after_end = 0;
  uint64_t before = 0;
  for (size_t k = 0; !ended && k + 1 < chunks.size(); ++k) {
    std::string_view c(state.data() + chunks[k].first, chunks[k].second);
    uint64_t said = 0;
    if (c.size() == kEndMarker.size() + 8 && c.substr(0, kEndMarker.size()) == kEndMarker) {
      std::memcpy(&said, c.data() + kEndMarker.size(), 8);
      if (said == before) {
        data_after_end = chunks[k + 1].first - kRecordHeaderBytes;
        break;
      }
    }
    before += c.size();
  }
  size_t file_size = state.size();
  if (scan.end != ScanResult::End::kClean) {
    error = fmt::format("offset {}: {}", scan.bad_offset, scan.problem);
    return false;
  }
  if (data_after_end != 0) {
    error = fmt::format("offset {}: data after the end record", data_after_end);
    return false;
  }
  if (scan.sequence != sequence) {
    error = fmt::format("offset 16: snapshot number {} does not match its name", scan.sequence);
    return false;
  }
  size_t size = 0;
  for (const auto& [offset, length] : chunks) {
    std::memmove(state.data() + size, state.data() + offset, length);
    size += length;
  }
  state.resize(size);
  if (!ended || announced != size) {
    error = fmt::format("offset {}: the snapshot is incomplete (no end record)", file_size);
    return false;
  }
  return true;
}

}  // namespace anteroom::store::log
