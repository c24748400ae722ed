#include "server/queue_keys.h"

#include <utility>

namespace anteroom::server {

QueueKeys::QueueKeys(store::Backend& backend, const Clock& clock, int64_t fresh_ms,
                     size_t max_entries)
    : backend_(backend), clock_(clock), fresh_ms_(fresh_ms), max_entries_(max_entries) {}

std::optional<std::optional<std::string>> QueueKeys::Cached(const std::string& queue) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(queue);
  if (it == entries_.end() || clock_.NowMs() - it->second.read_ms >= fresh_ms_) {
    return std::nullopt;
  }
  return it->second.digest;
}

void QueueKeys::Fetch(const std::string& queue,
                      std::function<void(OpResult<std::optional<std::string>>)> done) {
  uint64_t epoch;
  {
    std::lock_guard lock(mu_);
    epoch = notes_;
  }
  backend_.GetQueueKey(
      queue, [this, queue, epoch, done = std::move(done)](OpResult<std::optional<std::string>> r) {
        if (r.ok()) Store(queue, *r, epoch);
        done(std::move(r));
      });
}

void QueueKeys::Note(const std::string& queue, std::optional<std::string> digest) {
  uint64_t epoch;
  {
    std::lock_guard lock(mu_);
    epoch = ++notes_;
  }
  Store(queue, std::move(digest), epoch);
}

void QueueKeys::Store(const std::string& queue, std::optional<std::string> digest, uint64_t epoch) {
  std::lock_guard lock(mu_);
  if (epoch != notes_) return;  // a change of this process's came after the read: it wins
  if (entries_.size() >= max_entries_ && !entries_.contains(queue)) entries_.clear();
  entries_[queue] = Entry{std::move(digest), clock_.NowMs()};
}

}  // namespace anteroom::server
