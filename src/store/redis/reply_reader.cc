#include "store/redis/reply_reader.h"

#include <hiredis/read.h>

#include <algorithm>
#include <memory>

namespace anteroom::store::redis {

namespace {

// hiredis's reader builds each reply through these callbacks. They build Reply directly:
// hiredis's own objects allocate an array's element table up front from the announced count
// (calloc of 16 GiB for "*2147483647\r\n"); here an array grows only with the elements that
// actually arrive, so memory stays bounded by the bytes received.
//
// A child is added to its parent when it is created. The parent is always the last element
// of its own parent (or the root) and is complete before a sibling is added, so the pointers
// hiredis keeps to unfinished arrays stay valid.
Reply* Place(const redisReadTask* task, Reply value) {
  if (task->parent == nullptr) return new Reply(std::move(value));  // the root: hiredis owns it
  auto* parent = static_cast<Reply*>(task->parent->obj);
  parent->elements.push_back(std::move(value));
  return &parent->elements.back();
}

constexpr size_t kReserveAtMost = 1024;  // of an announced count, before the elements arrive

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Reply r;
  r.type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::kError
           : task->type == REDIS_REPLY_STATUS ? Reply::Type::kStatus
                                              : Reply::Type::kString;
  r.str.assign(str, len);
  return Place(task, std::move(r));
}

void* CreateArray(const redisReadTask* task, int elements) {
  Reply r;
  r.type = Reply::Type::kArray;
  r.elements.reserve(std::min<size_t>(static_cast<size_t>(std::max(elements, 0)), kReserveAtMost));
  return Place(task, std::move(r));
}

void* CreateInteger(const redisReadTask* task, long long value) {  // NOLINT(runtime/int)
  Reply r;
  r.type = Reply::Type::kInteger;
  r.integer = value;
  return Place(task, std::move(r));
}

void* CreateNil(const redisReadTask* task) { return Place(task, Reply()); }

// Only ever called on a root (hiredis frees nothing else).
void FreeObject(void* reply) { delete static_cast<Reply*>(reply); }

redisReplyObjectFunctions kFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                        FreeObject};

}  // namespace

ReplyReader::ReplyReader() : reader_(redisReaderCreateWithFunctions(&kFunctions)) {}

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
  std::unique_ptr<Reply> reply(static_cast<Reply*>(raw));
  out = std::move(*reply);
  return Result::kReply;
}

std::string ReplyReader::error() const { return reader_->errstr; }

void ReplyReader::Reset() {
  redisReaderFree(reader_);
  reader_ = redisReaderCreateWithFunctions(&kFunctions);
}

}  // namespace anteroom::store::redis
