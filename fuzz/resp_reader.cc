// Bytes from a Redis server (or something posing as one): the RESP reader a connection uses
// (hiredis's, converted to Reply), fed in pieces as reads would deliver them, and the project's
// own code that walks the replies: Reply's accessors, MOVED/ASK redirects, CLUSTER SLOTS maps.
// The first byte sets the piece size; the reader must answer replies, ask for more, or refuse.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness.h"
#include "store/redis/cluster_client.h"
#include "store/redis/reply_reader.h"

namespace {

using anteroom::fuzz::Fail;
using anteroom::store::redis::Reply;

constexpr size_t kMaxReplies = 1024;

size_t Walk(const Reply& r, int depth) {
  if (depth > 16) Fail("a reply nested deeper than RESP allows");
  size_t n = 1;
  (void)r.AsInt();
  (void)r.failed();
  (void)r.IsError("MOVED");
  if (r.type != Reply::Type::kArray && !r.elements.empty()) Fail("elements in a non-array");
  if (r.at(r.elements.size()).type != Reply::Type::kNil) Fail("at() past the end not nil");
  for (const Reply& e : r.elements) n += Walk(e, depth + 1);
  return n;
}

void Use(const Reply& r) {
  Walk(r, 0);
  if (r.type == Reply::Type::kError) {
    uint16_t slot = 0;
    anteroom::store::redis::Endpoint to;
    if (ParseRedirect(r.str, "seed", slot, to)) {
      if (slot > 16383 || to.host.empty() || to.port == 0) Fail("a redirect read wrong", r.str);
    }
  }
  for (const auto& range : anteroom::store::redis::ParseSlotMap(r, "seed")) {
    if (range.first > range.last || range.last > 16383 || range.master.host.empty()) {
      Fail("a slot range read wrong");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t piece = 1 + data[0] % 64;
  if (data[0] >= 192) piece = size;  // all at once
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  anteroom::store::redis::ReplyReader reader;
  size_t replies = 0;
  while (!in.empty()) {
    std::string_view chunk = in.substr(0, piece);
    in.remove_prefix(chunk.size());
    if (!reader.Feed(chunk)) return 0;  // the connection is dropped
    while (replies < kMaxReplies) {
      Reply reply;
      auto next = reader.Next(reply);
      if (next == anteroom::store::redis::ReplyReader::Result::kError) {
        if (reader.error().empty()) Fail("a refusal without a reason");
        return 0;
      }
      if (next == anteroom::store::redis::ReplyReader::Result::kNeedMore) break;
      ++replies;
      Use(reply);
    }
  }
  return 0;
}
