#pragma once
// A session id stored inline when it is short (server-issued ids are 22 bytes), so looking a
// session up compares bytes already in cache instead of following a pointer. Longer ids (up
// to 128 bytes) live on the heap. 32 bytes, like std::string, with a larger inline part: the
// length takes one byte, as ids are at most kMaxBytes (the naming rule allows 128).

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace anteroom::core {

class SessionId {
 public:
  static constexpr size_t kInline = 23;
  static constexpr size_t kMaxBytes = 255;

  // `id` has at most kMaxBytes (callers check: the naming rule, a snapshot's reader).
  void Assign(std::string_view id) {
    size_ = static_cast<uint8_t>(id.size());
    if (id.size() <= kInline) {
      heap_.reset();
      // An empty view may have a null data(), which memcpy must not be given even for 0 bytes
      // (a snapshot cut short reads as empty views).
      if (!id.empty()) std::memcpy(inline_, id.data(), id.size());
    } else {
      heap_ = std::make_unique<char[]>(id.size());
      std::memcpy(heap_.get(), id.data(), id.size());
    }
  }
  void Clear() {
    heap_.reset();
    size_ = 0;
  }
  std::string_view view() const { return {size_ <= kInline ? inline_ : heap_.get(), size_}; }
  size_t HeapBytes() const { return size_ > kInline ? size_ : 0; }

 private:
  std::unique_ptr<char[]> heap_;
  uint8_t size_ = 0;
  char inline_[kInline] = {};
};
static_assert(sizeof(SessionId) == 32, "a session's id fills half a cache line, no more");

}  // namespace anteroom::core
