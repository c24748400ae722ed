#include "store/log/record_format.h"

#include <fmt/format.h>

#include <cstring>

#include "store/log/crc32c.h"

namespace anteroom::store::log {

namespace {

constexpr char kMagic[8] = {'a', 'n', 't', 'e', 'r', 'o', 'o', 'm'};

template <typename T>
void Put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A record at `pos` that passes every check, and its total size; 0 when there is none.
size_t ValidRecordAt(std::string_view data, size_t pos, std::string* why) {
  if (data.size() - pos < kRecordHeaderBytes) {
    if (why) *why = fmt::format("incomplete record header ({} bytes)", data.size() - pos);
    return 0;
  }
  const char* p = data.data() + pos;
  uint32_t length = Get<uint32_t>(p);
  uint32_t payload_crc = Get<uint32_t>(p + 4);
  uint32_t header_crc = Get<uint32_t>(p + 8);
  if (Crc32c(std::string_view(p, 8)) != header_crc) {
    if (why) *why = "record header checksum mismatch (damaged length or checksum)";
    return 0;
  }
  if (length > kMaxRecordBytes) {
    if (why) *why = fmt::format("record length {} is over the limit", length);
    return 0;
  }
  if (data.size() - pos - kRecordHeaderBytes < length) {
    if (why) {
      *why = fmt::format("incomplete record: {} bytes announced, {} present", length,
                         data.size() - pos - kRecordHeaderBytes);
    }
    return 0;
  }
  if (Crc32c(std::string_view(p + kRecordHeaderBytes, length)) != payload_crc) {
    if (why) *why = "record payload checksum mismatch";
    return 0;
  }
  return kRecordHeaderBytes + length;
}

}  // namespace

std::string FileHeader(FileKind kind, uint64_t sequence, uint32_t version) {
  std::string h(kMagic, sizeof kMagic);
  Put(h, static_cast<uint32_t>(kind));
  Put(h, version);
  Put(h, sequence);
  Put(h, uint32_t{0});
  Put(h, Crc32c(h));
  return h;
}

uint32_t HeaderVersion(std::string_view data) {
  if (data.size() < kFileHeaderBytes || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0 ||
      Crc32c(data.substr(0, kFileHeaderBytes - 4)) != Get<uint32_t>(data.data() + 28)) {
    return 0;
  }
  return Get<uint32_t>(data.data() + 12);
}

void AppendRecord(std::string& out, std::string_view payload) {
  char header[kRecordHeaderBytes];
  auto length = static_cast<uint32_t>(payload.size());
  uint32_t payload_crc = Crc32c(payload);
  std::memcpy(header, &length, 4);
  std::memcpy(header + 4, &payload_crc, 4);
  uint32_t header_crc = Crc32c(std::string_view(header, 8));
  std::memcpy(header + 8, &header_crc, 4);
  out.append(header, sizeof header);
  out.append(payload);
}

ScanResult Scan(std::string_view data, FileKind kind,
                const std::function<bool(std::string_view, size_t, std::string&)>& on_record) {
  ScanResult r;
  // The header: a short one is a torn tail (a crash while the file was being created).
  if (data.size() < kFileHeaderBytes) {
    r.end = ScanResult::End::kTornTail;
    r.problem = fmt::format("incomplete file header ({} bytes)", data.size());
    return r;
  }
  const char* h = data.data();
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0 ||
      Crc32c(std::string_view(h, kFileHeaderBytes - 4)) != Get<uint32_t>(h + 28)) {
    r.end = ScanResult::End::kDamaged;
    r.problem = "not an anteroom file, or its header is damaged";
    return r;
  }
  if (Get<uint32_t>(h + 8) != static_cast<uint32_t>(kind)) {
    r.end = ScanResult::End::kDamaged;
    r.problem = "wrong kind of file (log and snapshot swapped?)";
    return r;
  }
  if (uint32_t version = Get<uint32_t>(h + 12); !IsReadableFormat(version)) {
    r.end = ScanResult::End::kDamaged;
    r.problem = fmt::format("format version {} is not supported (this build reads {} to {})",
                            version, kOldestReadableFormat, kFormatVersion);
    return r;
  }
  r.sequence = Get<uint64_t>(h + 16);

  size_t pos = kFileHeaderBytes;
  r.valid_bytes = pos;
  while (pos < data.size()) {
    std::string why;
    size_t size = ValidRecordAt(data, pos, &why);
    if (size == 0) {
      r.bad_offset = pos;
      r.problem = why;
      r.end = ScanResult::End::kTornTail;
      // Damage rather than a torn tail if anything valid follows.
      for (size_t next = pos + 1; next + kRecordHeaderBytes <= data.size(); ++next) {
        if (ValidRecordAt(data, next, nullptr) != 0) {
          r.end = ScanResult::End::kDamaged;
          r.problem += fmt::format(" (a valid record follows at offset {})", next);
          break;
        }
      }
      return r;
    }
    std::string reject;
    if (!on_record(data.substr(pos + kRecordHeaderBytes, size - kRecordHeaderBytes), pos, reject)) {
      r.end = ScanResult::End::kDamaged;
      r.bad_offset = pos;
      r.problem = reject;
      return r;
    }
    pos += size;
    r.valid_bytes = pos;
    ++r.records;
  }
  return r;
}

}  // namespace anteroom::store::log
