// The durable backend's readers fed what a damaged disk could hold. The first byte picks:
//  0: a log segment as it lies on disk: framing (Scan), then each record replayed;
//  1: a snapshot file as it lies on disk (ReadSnapshotFile), then its state loaded;
//  2: unframed: a state (u32 length, bytes) loaded, then records (u16 length, bytes) replayed,
//     after framing them with valid checksums: the decoders behind the CRCs;
//  3: as 2, but the state goes through a snapshot file written by WriteSnapshotFile.
// Mode 0 replays as recovery does (presence expiries from their records); modes 2 and 3 do so
// when bit 2 of the first byte is set, else as a live backend (expiries by time), where a
// presence-expiry record must be refused. Seeds: fuzz/make_log_seeds.py.
// Damage must be reported (a torn tail, damage, a record that does not apply), never crash,
// hang or allocate without bound; a loaded state saved again must load again, to equal bytes.

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/clock.h"
#include "harness.h"
#include "store/log/record_format.h"
#include "store/log/snapshot_file.h"
#include "store/memory/memory_backend.h"

namespace {

using anteroom::ByteReader;
using anteroom::ByteWriter;
using anteroom::fuzz::Fail;
namespace log = anteroom::store::log;
namespace store = anteroom::store;

constexpr size_t kMaxRecords = 256;  // per input, so one input stays quick

std::string SnapshotPath() {
  static const std::string path = "/tmp/anteroom-fuzz-" + std::to_string(::getpid()) + ".snap";
  return path;
}

std::string Save(const store::MemoryBackend& backend) {
  std::string out;
  ByteWriter w(out);
  backend.SaveState(w);
  return out;
}

// A loaded state, saved, must load again and save to the same bytes.
void CheckRoundTrip(const store::MemoryBackend& loaded, const anteroom::Clock& clock) {
  std::string saved = Save(loaded);
  store::MemoryBackend again(clock, store::MemoryBackendOptions{.run_timer = false});
  ByteReader in(saved);
  if (!again.LoadState(in)) Fail("a saved state does not load");
  if (Save(again) != saved) Fail("a state saved twice differs");
}

void ReplayAll(store::MemoryBackend& backend, const std::vector<std::string_view>& records) {
  for (std::string_view record : records) {
    auto r = backend.Replay(record);
    if (!r.ok() && r.message().empty()) Fail("a replay error without a reason");
  }
}

void CheckScan(const log::ScanResult& scan, size_t size) {
  if (scan.valid_bytes > size || (scan.end != log::ScanResult::End::kClean &&
                                  (scan.bad_offset > size || scan.problem.empty()))) {
    Fail("an inconsistent scan result", scan.problem);
  }
  if (scan.end == log::ScanResult::End::kClean && size >= log::kFileHeaderBytes &&
      scan.valid_bytes != size) {
    Fail("a clean scan that stops short");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 4;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  anteroom::FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});

  if (mode == 0) {
    backend.StartReplay();
    size_t records = 0;
    auto scan =
        log::Scan(in, log::FileKind::kLog, [&](std::string_view payload, size_t, std::string& why) {
          auto r = backend.Replay(payload);
          if (!r.ok()) why = r.message();
          ++records;
          return r.ok();
        });
    CheckScan(scan, in.size());
    if (scan.records > records) Fail("more records counted than seen");
    return 0;
  }
  if (mode == 1) {
    std::string path = SnapshotPath();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::write(fd, in.data(), in.size()) != static_cast<ssize_t>(in.size())) {
      Fail("cannot write the scratch file", path);
    }
    ::close(fd);
    std::string state, error;
    bool ok = log::ReadSnapshotFile(path, 7, state, error);
    if (!ok && error.empty()) Fail("a snapshot refused without a reason");
    if (ok) {
      ByteReader r(state);
      if (backend.LoadState(r)) CheckRoundTrip(backend, clock);
    }
    return 0;
  }

  // 2 and 3: u32 state length, state, then records of u16 length.
  uint32_t state_size = 0;
  if (in.size() >= 4) {
    std::memcpy(&state_size, in.data(), 4);
    in.remove_prefix(4);
  }
  std::string_view state = in.substr(0, std::min<size_t>(state_size, in.size()));
  in.remove_prefix(state.size());
  std::vector<std::string_view> records;
  while (in.size() >= 2 && records.size() < kMaxRecords) {
    uint16_t n;
    std::memcpy(&n, in.data(), 2);
    in.remove_prefix(2);
    records.push_back(in.substr(0, n));
    in.remove_prefix(records.back().size());
  }

  const bool presence_from_log = (data[0] & 4) != 0;
  if (presence_from_log) backend.StartReplay();
  std::string loaded_state(state);
  if (mode == 3) {
    std::string path = SnapshotPath();
    int rc = log::WriteSnapshotFile(path, 3, [&](ByteWriter& w) { w.PutBytes(state); });
    if (rc != 0) Fail("cannot write the scratch snapshot", path);
    std::string error;
    if (!log::ReadSnapshotFile(path, 3, loaded_state, error)) {
      Fail("a snapshot just written does not read", error);
    }
    if (loaded_state != state) Fail("a snapshot reads back different bytes");
  }
  if (!state.empty()) {
    ByteReader r(loaded_state);
    if (!backend.LoadState(r)) {
      // Refused: the backend may hold part of it; start the records from nothing.
      store::MemoryBackend fresh(clock, store::MemoryBackendOptions{.run_timer = false});
      if (presence_from_log) fresh.StartReplay();
      ReplayAll(fresh, records);
      return 0;
    }
    CheckRoundTrip(backend, clock);
  }

  // The records framed as the journal frames them: a clean scan that hands each back whole.
  std::string file = log::FileHeader(log::FileKind::kLog, 1);
  for (std::string_view record : records) log::AppendRecord(file, record);
  size_t seen = 0;
  auto scan =
      log::Scan(file, log::FileKind::kLog, [&](std::string_view payload, size_t, std::string&) {
        if (seen >= records.size() || payload != records[seen])
          Fail("a framed record read back wrong");
        ++seen;
        return true;
      });
  if (scan.end != log::ScanResult::End::kClean || seen != records.size()) {
    Fail("valid framing not read as clean", scan.problem);
  }
  ReplayAll(backend, records);
  if (!records.empty()) CheckRoundTrip(backend, clock);
  return 0;
}
