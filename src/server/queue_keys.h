#pragma once
// Queues with keys of their own (docs/security.md, "Who may do what"): the operator sets one
// with PUT /v1/queues/{q}/key, the backend keeps its SHA-256 digest, shared by every process,
// and the router asks here before a kQueue route of that queue runs. A queue with its own key
// takes that key or the admin key, and nothing else (not the server's queue key, and not no
// key on a server whose queues are otherwise open); a queue without one follows the server's
// rule.
//
// The router asks on every queue request, so answers are cached per process for `fresh_ms`
// (1 s): a key set or removed through another process is obeyed here within that time; through
// this one, at once (Note). The cache holds at most `max_entries` queues (junk names included),
// and starts over when full.

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/op_status.h"
#include "server/http_names.h"
#include "store/backend.h"

namespace anteroom::server {

class QueueKeys final : public QueueKeyLookup {
 public:
  static constexpr int64_t kFreshMs = 1000;
  static constexpr size_t kMaxEntries = 20'000;

  QueueKeys(store::Backend& backend, const Clock& clock, int64_t fresh_ms = kFreshMs,
            size_t max_entries = kMaxEntries);

  std::optional<std::optional<std::string>> Cached(const std::string& queue) const override;
  void Fetch(const std::string& queue,
             std::function<void(OpResult<std::optional<std::string>>)> done) override;
  // This process set (a digest) or removed (nullopt) the queue's key.
  void Note(const std::string& queue, std::optional<std::string> digest);

 private:
  struct Entry {
    std::optional<std::string> digest;
    int64_t read_ms;
  };
  // Keeps what was read unless this process changed a key since the read began (`epoch`).
  void Store(const std::string& queue, std::optional<std::string> digest, uint64_t epoch);

  store::Backend& backend_;
  const Clock& clock_;
  const int64_t fresh_ms_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  uint64_t notes_ = 0;                              // guarded by mu_: Note calls so far
};

}  // namespace anteroom::server
