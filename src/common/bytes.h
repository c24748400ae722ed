#pragma once
// A plain binary encoding for snapshots and log records: fixed-width little-endian integers and
// length-prefixed byte strings, appended to a std::string. No I/O: the log and snapshot files
// frame and checksum what these produce.
//
// ByteReader never reads past its end: a short or damaged input sets failed() and the getters
// answer zeros from then on, so decoders check failed() once at the end instead of after every
// field.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

namespace anteroom {

class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  // Hands the buffer to `spill` whenever it holds `threshold` bytes or more (between fields),
  // so a large snapshot streams to its file instead of growing one string.
  void SetSpill(size_t threshold, std::function<void(std::string&)> spill) {
    spill_threshold_ = threshold;
    spill_ = std::move(spill);
  }
  void Flush() {
    if (spill_ && !out_.empty()) spill_(out_);
  }

  template <typename T>
  void Put(T v) {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // x86-64 and arm64 are little-endian; the format is too
    out_.append(b, sizeof(T));
    MaybeSpill();
  }
  void PutBool(bool v) { Put<uint8_t>(v ? 1 : 0); }
  void PutString(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
    MaybeSpill();
  }
  // Bytes written by another ByteWriter, passed on unframed (in pieces, so spills still come).
  void PutBytes(std::string_view raw) {
    const size_t piece = spill_threshold_ == SIZE_MAX ? raw.size() : spill_threshold_;
    while (!raw.empty()) {
      const size_t n = std::min(piece, raw.size());
      out_.append(raw.substr(0, n));
      raw.remove_prefix(n);
      MaybeSpill();
    }
  }
  size_t size() const { return out_.size(); }
  std::string& buffer() { return out_; }

 private:
  void MaybeSpill() {
    if (out_.size() >= spill_threshold_ && spill_) spill_(out_);
  }
  std::string& out_;
  size_t spill_threshold_ = SIZE_MAX;
  std::function<void(std::string&)> spill_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : p_(in.data()), end_(in.data() + in.size()) {}

  template <typename T>
  T Get() {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
    T v{};
    if (!Need(sizeof(T))) return v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  bool GetBool() { return Get<uint8_t>() != 0; }
  std::string_view GetView() {
    uint32_t n = Get<uint32_t>();
    if (!Need(n)) return {};
    std::string_view s(p_, n);
    p_ += n;
    return s;
  }
  std::string GetString() { return std::string(GetView()); }
  // A count of items that each take at least `min_item_bytes`: a damaged count fails here
  // instead of making the caller reserve gigabytes.
  uint64_t GetCount(size_t min_item_bytes) {
    uint64_t n = Get<uint64_t>();
    if (min_item_bytes > 0 && n > remaining() / min_item_bytes) failed_ = true;
    return failed_ ? 0 : n;
  }

  bool failed() const { return failed_; }
  void Fail() { failed_ = true; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool done() const { return !failed_ && p_ == end_; }

 private:
  bool Need(size_t n) {
    if (failed_ || remaining() < n) {
      failed_ = true;
      return false;
    }
    return true;
  }
  const char* p_;
  const char* end_;
  bool failed_ = false;
};

}  // namespace anteroom
