#include "store/redis/reply_reader.h"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

namespace anteroom::store::redis {

namespace {

Reply Convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = Reply::Type::kNil;
  }
  return out;
}

}  // namespace

ReplyReader::ReplyReader() : reader_(redisReaderCreate()) {}

ReplyReader::~ReplyReader() {
  if (reader_) redisReaderFree(reader_);
}

bool ReplyReader::Feed(std::string_view bytes) {
  return redisReaderFeed(reader_, bytes.data(), bytes.size()) == REDIS_OK;
}

ReplyReader::Result ReplyReader::Next(Reply& out) {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) return Result::kError;
  if (raw == nullptr) return Result::kNeedMore;
  out = Convert(static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return Result::kReply;
}

std::string ReplyReader::error() const { return reader_->errstr; }

void ReplyReader::Reset() {
  redisReaderFree(reader_);
  reader_ = redisReaderCreate();
}

}  // namespace anteroom::store::redis
