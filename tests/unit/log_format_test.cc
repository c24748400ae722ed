// Unit tests of the durable log's framing: CRC-32C and record_format.h (file header, records,
// and Scan's three endings: clean, torn tail, damage).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "store/log/crc32c.h"
#include "store/log/record_format.h"

namespace anteroom::store::log {
namespace {

using End = ScanResult::End;

const char* EndName(End end) {
  switch (end) {
    case End::kClean:
      return "clean";
    case End::kTornTail:
      return "torn tail";
    case End::kDamaged:
      return "damaged";
  }
  return "?";
}

// Everything Scan reported, with the records it accepted.
struct Scanned {
  ScanResult result;
  std::vector<std::string> payloads;
  std::vector<size_t> offsets;
};

Scanned ScanAll(std::string_view data, FileKind kind = FileKind::kLog) {
  Scanned s;
  s.result = Scan(data, kind, [&](std::string_view payload, size_t offset, std::string&) {
    s.payloads.emplace_back(payload);
    s.offsets.push_back(offset);
    return true;
  });
  return s;
}

// A log file of the given payloads, and where each record starts.
struct Built {
  std::string data;
  std::vector<size_t> offsets;
};

Built BuildFile(const std::vector<std::string>& payloads, uint64_t sequence = 1,
                FileKind kind = FileKind::kLog) {
  Built b;
  b.data = FileHeader(kind, sequence);
  for (const auto& p : payloads) {
    b.offsets.push_back(b.data.size());
    AppendRecord(b.data, p);
  }
  return b;
}

std::vector<std::string> SomePayloads() {
  return {
      "first change",
      "",  // an empty record
      "a somewhat longer third change record payload",
      std::string(300, 'x'),
      "fifth",
      "the sixth and last",
  };
}

uint32_t GetU32(const std::string& data, size_t at) {
  uint32_t v;
  std::memcpy(&v, data.data() + at, 4);
  return v;
}

void PutU32(std::string& data, size_t at, uint32_t v) { std::memcpy(data.data() + at, &v, 4); }

// A record header announcing `length` bytes, with a correct header checksum.
std::string RecordHeader(uint32_t length, uint32_t payload_crc) {
  std::string h(12, '\0');
  PutU32(h, 0, length);
  PutU32(h, 4, payload_crc);
  PutU32(h, 8, Crc32c(std::string_view(h.data(), 8)));
  return h;
}

// ---- crc32c --------------------------------------------------------------------------------

TEST(LogCrc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

TEST(LogCrc32cTest, ChainingEqualsOneCallAtEverySplit) {
  std::string data;
  for (int i = 0; i < 101; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  const uint32_t whole = Crc32c(data);
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    std::string_view a(data.data(), cut);
    std::string_view b(data.data() + cut, data.size() - cut);
    EXPECT_EQ(Crc32c(b, Crc32c(a)), whole) << "cut at " << cut;
  }
  // Three pieces, and the "123456789" vector split unevenly.
  EXPECT_EQ(Crc32c("789", Crc32c("3456", Crc32c("12"))), 0xE3069283u);
}

TEST(LogCrc32cTest, DetectsEverySingleBitFlip) {
  const std::string data = "anteroom change record 0123456789";
  const uint32_t good = Crc32c(data);
  for (size_t i = 0; i < data.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = data;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      EXPECT_NE(Crc32c(bad), good) << "byte " << i << " bit " << bit;
    }
  }
}

// ---- header and records --------------------------------------------------------------------

TEST(LogFormatTest, FileHeaderLayout) {
  std::string h = FileHeader(FileKind::kLog, 0x0102030405060708ull);
  ASSERT_EQ(h.size(), kFileHeaderBytes);
  EXPECT_EQ(h.substr(0, 8), "anteroom");
  EXPECT_EQ(h.substr(8, 4), "LOG1");
  EXPECT_EQ(GetU32(h, 12), kFormatVersion);
  uint64_t seq;
  std::memcpy(&seq, h.data() + 16, 8);
  EXPECT_EQ(seq, 0x0102030405060708ull);
  EXPECT_EQ(GetU32(h, 24), 0u);
  EXPECT_EQ(GetU32(h, 28), Crc32c(std::string_view(h.data(), 28)));
  EXPECT_EQ(FileHeader(FileKind::kSnapshot, 1).substr(8, 4), "SNP1");
}

TEST(LogFormatTest, RecordLayout) {
  std::string out = "prefix";
  AppendRecord(out, "hello");
  ASSERT_EQ(out.size(), 6 + kRecordHeaderBytes + 5);
  EXPECT_EQ(GetU32(out, 6), 5u);
  EXPECT_EQ(GetU32(out, 10), Crc32c("hello"));
  EXPECT_EQ(GetU32(out, 14), Crc32c(std::string_view(out.data() + 6, 8)));
  EXPECT_EQ(out.substr(18), "hello");
}

// ---- clean scans ---------------------------------------------------------------------------

TEST(LogFormatTest, CleanFileReadsEveryRecordInOrderWithOffsets) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads, 42);
  Scanned s = ScanAll(b.data);
  EXPECT_EQ(s.result.end, End::kClean) << s.result.problem;
  EXPECT_EQ(s.result.sequence, 42u);
  EXPECT_EQ(s.result.records, payloads.size());
  EXPECT_EQ(s.result.valid_bytes, b.data.size());
  EXPECT_EQ(s.result.problem, "");
  EXPECT_EQ(s.payloads, payloads);
  EXPECT_EQ(s.offsets, b.offsets);
  EXPECT_EQ(b.offsets.front(), kFileHeaderBytes);
}

TEST(LogFormatTest, HeaderOnlyFileIsClean) {
  Scanned s = ScanAll(FileHeader(FileKind::kLog, 3));
  EXPECT_EQ(s.result.end, End::kClean) << s.result.problem;
  EXPECT_EQ(s.result.sequence, 3u);
  EXPECT_EQ(s.result.records, 0u);
  EXPECT_EQ(s.result.valid_bytes, kFileHeaderBytes);
  EXPECT_TRUE(s.payloads.empty());
}

TEST(LogFormatTest, SnapshotKindScansAsSnapshot) {
  Built b = BuildFile({"chunk one", "chunk two"}, 9, FileKind::kSnapshot);
  Scanned s = ScanAll(b.data, FileKind::kSnapshot);
  EXPECT_EQ(s.result.end, End::kClean) << s.result.problem;
  EXPECT_EQ(s.result.sequence, 9u);
  EXPECT_EQ(s.payloads, (std::vector<std::string>{"chunk one", "chunk two"}));
}

// ---- torn tails ----------------------------------------------------------------------------

TEST(LogFormatTest, ShortFileHeaderIsATornTail) {
  std::string h = FileHeader(FileKind::kLog, 1);
  for (size_t n = 0; n < kFileHeaderBytes; ++n) {
    Scanned s = ScanAll(std::string_view(h.data(), n));
    EXPECT_EQ(s.result.end, End::kTornTail) << n << " bytes: " << EndName(s.result.end);
    EXPECT_EQ(s.result.valid_bytes, 0u) << n;
    EXPECT_EQ(s.result.records, 0u) << n;
  }
}

TEST(LogFormatTest, LastRecordCutAnywhereIsATornTailAtItsStart) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads);
  const size_t last = b.offsets.back();
  // Cut exactly at the last record: a clean file of the others.
  {
    Scanned s = ScanAll(std::string_view(b.data.data(), last));
    EXPECT_EQ(s.result.end, End::kClean) << s.result.problem;
    EXPECT_EQ(s.result.records, payloads.size() - 1);
  }
  // Cut inside its header (1..11 bytes) or inside its payload.
  for (size_t len = last + 1; len < b.data.size(); ++len) {
    Scanned s = ScanAll(std::string_view(b.data.data(), len));
    EXPECT_EQ(s.result.end, End::kTornTail)
        << "cut at " << len << ": " << EndName(s.result.end) << ": " << s.result.problem;
    EXPECT_EQ(s.result.valid_bytes, last) << "cut at " << len;
    EXPECT_EQ(s.result.bad_offset, last) << "cut at " << len;
    EXPECT_EQ(s.result.records, payloads.size() - 1) << "cut at " << len;
    EXPECT_FALSE(s.result.problem.empty());
    // The records before the cut were all delivered.
    EXPECT_EQ(s.payloads, std::vector<std::string>(payloads.begin(), payloads.end() - 1));
  }
}

TEST(LogFormatTest, CutMessagesSayWhatIsIncomplete) {
  Built b = BuildFile({"one", "two two two"});
  const size_t last = b.offsets.back();
  Scanned in_header = ScanAll(std::string_view(b.data.data(), last + 5));
  EXPECT_NE(in_header.result.problem.find("incomplete record header"), std::string::npos)
      << in_header.result.problem;
  Scanned in_payload = ScanAll(std::string_view(b.data.data(), last + kRecordHeaderBytes + 4));
  EXPECT_NE(in_payload.result.problem.find("11 bytes announced, 4 present"), std::string::npos)
      << in_payload.result.problem;
}

TEST(LogFormatTest, ZeroFilledTailIsTorn) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads);
  const size_t end = b.data.size();
  for (size_t zeros : {1, 11, 12, 13, 100, 4096}) {
    std::string data = b.data + std::string(zeros, '\0');
    Scanned s = ScanAll(data);
    EXPECT_EQ(s.result.end, End::kTornTail)
        << zeros << " zeros: " << EndName(s.result.end) << ": " << s.result.problem;
    EXPECT_EQ(s.result.valid_bytes, end) << zeros;
    EXPECT_EQ(s.result.bad_offset, end) << zeros;
    EXPECT_EQ(s.result.records, payloads.size()) << zeros;
  }
  // A header followed only by zeros (a preallocated file).
  Scanned s = ScanAll(FileHeader(FileKind::kLog, 1) + std::string(512, '\0'));
  EXPECT_EQ(s.result.end, End::kTornTail) << s.result.problem;
  EXPECT_EQ(s.result.valid_bytes, kFileHeaderBytes);
}

TEST(LogFormatTest, FlippedByteInTheLastRecordIsTorn) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads);
  const size_t last = b.offsets.back();
  for (size_t i = last; i < b.data.size(); ++i) {
    std::string data = b.data;
    data[i] = static_cast<char>(data[i] ^ 0x20);
    Scanned s = ScanAll(data);
    EXPECT_EQ(s.result.end, End::kTornTail)
        << "byte " << i << ": " << EndName(s.result.end) << ": " << s.result.problem;
    EXPECT_EQ(s.result.bad_offset, last) << "byte " << i;
    EXPECT_EQ(s.result.valid_bytes, last) << "byte " << i;
    EXPECT_EQ(s.result.records, payloads.size() - 1) << "byte " << i;
  }
}

// ---- damage --------------------------------------------------------------------------------

TEST(LogFormatTest, FlippedPayloadByteInAMiddleRecordIsDamageAtThatRecord) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads);
  const size_t k = 2;  // a middle record with a payload
  ASSERT_FALSE(payloads[k].empty());
  const size_t at = b.offsets[k];
  for (size_t i = at + kRecordHeaderBytes; i < b.offsets[k + 1]; ++i) {
    std::string data = b.data;
    data[i] = static_cast<char>(data[i] ^ 0x01);
    Scanned s = ScanAll(data);
    EXPECT_EQ(s.result.end, End::kDamaged)
        << "byte " << i << ": " << EndName(s.result.end) << ": " << s.result.problem;
    EXPECT_EQ(s.result.bad_offset, at) << "byte " << i;
    EXPECT_EQ(s.result.valid_bytes, at) << "byte " << i;
    EXPECT_EQ(s.result.records, k) << "byte " << i;
    EXPECT_NE(s.result.problem.find("payload checksum mismatch"), std::string::npos)
        << s.result.problem;
    EXPECT_NE(s.result.problem.find("a valid record follows at offset " +
                                    std::to_string(b.offsets[k + 1])),
              std::string::npos)
        << s.result.problem;
    EXPECT_EQ(s.payloads, std::vector<std::string>(payloads.begin(), payloads.begin() + k));
  }
}

TEST(LogFormatTest, FlippedLengthOrChecksumByteInAMiddleRecordIsDamageNotTorn) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads);
  for (size_t k : {size_t{0}, size_t{1}, size_t{3}}) {
    const size_t at = b.offsets[k];
    for (size_t i = at; i < at + kRecordHeaderBytes; ++i) {
      for (int bit : {0, 7}) {
        std::string data = b.data;
        data[i] = static_cast<char>(data[i] ^ (1 << bit));
        Scanned s = ScanAll(data);
        EXPECT_EQ(s.result.end, End::kDamaged)
            << "record " << k << " byte " << i << " bit " << bit << ": " << EndName(s.result.end);
        EXPECT_EQ(s.result.bad_offset, at) << "record " << k << " byte " << i;
        EXPECT_EQ(s.result.valid_bytes, at) << "record " << k << " byte " << i;
        EXPECT_EQ(s.result.records, k) << "record " << k << " byte " << i;
      }
    }
  }
  // The length field specifically: the header checksum catches it before it is believed.
  std::string data = b.data;
  PutU32(data, b.offsets[1], 1000);
  Scanned s = ScanAll(data);
  EXPECT_EQ(s.result.end, End::kDamaged);
  EXPECT_EQ(s.result.bad_offset, b.offsets[1]);
  EXPECT_NE(s.result.problem.find("record header checksum mismatch"), std::string::npos)
      << s.result.problem;
}

TEST(LogFormatTest, EveryByteOfADamagedFileHeaderIsDamage) {
  Built b = BuildFile(SomePayloads());
  for (size_t i = 0; i < kFileHeaderBytes; ++i) {
    std::string data = b.data;
    data[i] = static_cast<char>(data[i] ^ 0x04);
    Scanned s = ScanAll(data);
    EXPECT_EQ(s.result.end, End::kDamaged) << "byte " << i << ": " << EndName(s.result.end);
    EXPECT_EQ(s.result.bad_offset, 0u) << "byte " << i;
    EXPECT_EQ(s.result.records, 0u) << "byte " << i;
    EXPECT_TRUE(s.payloads.empty()) << "byte " << i;
    EXPECT_NE(s.result.problem.find("header is damaged"), std::string::npos) << s.result.problem;
  }
}

TEST(LogFormatTest, WrongKindIsDamage) {
  Built snapshot = BuildFile({"a", "b"}, 1, FileKind::kSnapshot);
  Scanned s = ScanAll(snapshot.data, FileKind::kLog);
  EXPECT_EQ(s.result.end, End::kDamaged);
  EXPECT_EQ(s.result.records, 0u);
  EXPECT_TRUE(s.payloads.empty());
  EXPECT_NE(s.result.problem.find("wrong kind"), std::string::npos) << s.result.problem;

  Built log = BuildFile({"a"}, 1, FileKind::kLog);
  Scanned t = ScanAll(log.data, FileKind::kSnapshot);
  EXPECT_EQ(t.result.end, End::kDamaged);
  EXPECT_NE(t.result.problem.find("wrong kind"), std::string::npos) << t.result.problem;
}

TEST(LogFormatTest, UnknownVersionIsDamage) {
  std::string data = BuildFile({"a"}).data;
  PutU32(data, 12, kFormatVersion + 1);
  PutU32(data, 28, Crc32c(std::string_view(data.data(), 28)));  // a well-formed newer header
  Scanned s = ScanAll(data);
  EXPECT_EQ(s.result.end, End::kDamaged);
  EXPECT_TRUE(s.payloads.empty());
  EXPECT_NE(
      s.result.problem.find(fmt::format("format version {} is not supported (this build "
                                        "reads {} to {})",
                                        kFormatVersion + 1, kOldestReadableFormat, kFormatVersion)),
      std::string::npos)
      << s.result.problem;
  PutU32(data, 12, 0);
  PutU32(data, 28, Crc32c(std::string_view(data.data(), 28)));
  EXPECT_EQ(ScanAll(data).result.end, End::kDamaged) << "versions start at 1";
  PutU32(data, 12, kOldestReadableFormat - 1);
  PutU32(data, 28, Crc32c(std::string_view(data.data(), 28)));
  EXPECT_EQ(ScanAll(data).result.end, End::kDamaged) << "older than the oldest read";
  PutU32(data, 12, kOldestReadableFormat);
  PutU32(data, 28, Crc32c(std::string_view(data.data(), 28)));
  EXPECT_EQ(ScanAll(data).result.end, End::kClean) << "the oldest read";
}

// An older version is refused as a newer one is: each version has one layout.
TEST(LogFormatTest, OlderVersionsAreDamageAndHeaderVersionSaysWhich) {
  std::string data = BuildFile({"a", "b"}).data;
  EXPECT_EQ(HeaderVersion(data), kFormatVersion);
  PutU32(data, 12, 2);
  PutU32(data, 28, Crc32c(std::string_view(data.data(), 28)));
  EXPECT_EQ(HeaderVersion(data), 2u);
  Scanned s = ScanAll(data);
  EXPECT_EQ(s.result.end, End::kDamaged);
  EXPECT_NE(s.result.problem.find("format version 2"), std::string::npos) << s.result.problem;
  // A header too short or damaged says nothing.
  EXPECT_EQ(HeaderVersion(data.substr(0, kFileHeaderBytes - 1)), 0u);
  data[20] ^= 1;
  EXPECT_EQ(HeaderVersion(data), 0u);
}

TEST(LogFormatTest, LengthOverTheLimitIsRefused) {
  Built b = BuildFile({"one", "two"});
  const size_t bad_at = b.data.size();
  // A header with a correct checksum whose length is over the limit, then a valid record.
  std::string data = b.data + RecordHeader(kMaxRecordBytes + 1, 0) + std::string(20, 'z');
  const size_t next = data.size();
  AppendRecord(data, "three");
  Scanned s = ScanAll(data);
  EXPECT_EQ(s.result.end, End::kDamaged) << s.result.problem;
  EXPECT_EQ(s.result.bad_offset, bad_at);
  EXPECT_EQ(s.result.valid_bytes, bad_at);
  EXPECT_EQ(s.result.records, 2u);
  EXPECT_NE(s.result.problem.find("record length " + std::to_string(kMaxRecordBytes + 1) +
                                  " is over the limit"),
            std::string::npos)
      << s.result.problem;
  EXPECT_NE(s.result.problem.find("follows at offset " + std::to_string(next)), std::string::npos)
      << s.result.problem;

  // The largest length (which would wrap a 32-bit sum) is refused the same way.
  std::string huge = b.data + RecordHeader(UINT32_MAX, 0);
  Scanned h = ScanAll(huge);
  EXPECT_NE(h.result.end, End::kClean);
  EXPECT_EQ(h.result.bad_offset, bad_at);
  EXPECT_NE(h.result.problem.find("over the limit"), std::string::npos) << h.result.problem;

  // Exactly the limit is allowed by the length check (here it then runs past the end).
  std::string at_limit = b.data + RecordHeader(kMaxRecordBytes, 0) + "short";
  Scanned l = ScanAll(at_limit);
  EXPECT_EQ(l.result.end, End::kTornTail);
  EXPECT_EQ(l.result.bad_offset, bad_at);
  EXPECT_NE(l.result.problem.find("incomplete record: " + std::to_string(kMaxRecordBytes) +
                                  " bytes announced, 5 present"),
            std::string::npos)
      << l.result.problem;
}

TEST(LogFormatTest, RejectedRecordIsDamageWithItsReason) {
  const auto payloads = SomePayloads();
  Built b = BuildFile(payloads);
  std::vector<std::string> seen;
  ScanResult r =
      Scan(b.data, FileKind::kLog, [&](std::string_view payload, size_t offset, std::string& why) {
        if (offset == b.offsets[3]) {
          why = "does not apply: no such room";
          return false;
        }
        seen.emplace_back(payload);
        return true;
      });
  EXPECT_EQ(r.end, End::kDamaged);
  EXPECT_EQ(r.bad_offset, b.offsets[3]);
  EXPECT_EQ(r.valid_bytes, b.offsets[3]);
  EXPECT_EQ(r.records, 3u);
  EXPECT_EQ(r.problem, "does not apply: no such room");
  EXPECT_EQ(seen, std::vector<std::string>(payloads.begin(), payloads.begin() + 3));
}

TEST(LogFormatTest, RecordsAppendedAfterATornTailMakeItDamage) {
  // A cut record followed by a whole one: truncating would lose the whole one.
  Built b = BuildFile({"alpha", "beta"});
  std::string data = b.data.substr(0, b.data.size() - 2);
  const size_t next = data.size();
  AppendRecord(data, "gamma");
  Scanned s = ScanAll(data);
  EXPECT_EQ(s.result.end, End::kDamaged);
  EXPECT_EQ(s.result.bad_offset, b.offsets[1]);
  EXPECT_EQ(s.result.records, 1u);
  EXPECT_NE(s.result.problem.find("follows at offset " + std::to_string(next)), std::string::npos)
      << s.result.problem;
}

}  // namespace
}  // namespace anteroom::store::log
