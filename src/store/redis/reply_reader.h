#pragma once
// RESP replies from the bytes a connection reads: hiredis's reader, each reply converted to
// Reply. Its own unit so the fuzzer (fuzz/resp_reader.cc) reads exactly what a connection does.

#include <string>
#include <string_view>

#include "store/redis/resp_reply.h"

struct redisReader;

namespace anteroom::store::redis {

class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // Adds bytes read from the connection; false if the reader refuses them.
  bool Feed(std::string_view bytes);
  enum class Result { kReply, kNeedMore, kError };
  // The next whole reply into `out`, kNeedMore until one is buffered, or kError (see error())
  // when the stream is not RESP: the connection must then be dropped.
  Result Next(Reply& out);
  std::string error() const;
  // Forgets everything buffered (a new connection).
  void Reset();

 private:
  redisReader* reader_ = nullptr;
};

}  // namespace anteroom::store::redis
