#pragma once
// The bytes held for request bodies still arriving, across every connection of the server.
//
// A body is held whole until its request is handled (Beast's string body reserves the whole
// Content-Length at once), so 40 clients each sending all but the last byte of a 16 MiB push
// held 640 MB. Bodies over the default body limit reserve their size here first; when the
// total would pass the cap the new body is refused (503 + Retry-After) and the senders that
// have gone longest without sending a byte are cut, so the retry finds room. Smaller bodies
// are not counted: --max-connections x 64 KiB bounds them.
//
// Thread-safe: connections on every I/O thread reserve, report progress and release.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>

namespace anteroom::http {

class BodyBudget : public std::enable_shared_from_this<BodyBudget> {
 public:
  // The share of one body in flight, released when the last holder drops it.
  class Ticket {
   public:
    ~Ticket();
    // The bytes received so far, reported by the connection (at its own pace).
    void Progress(uint64_t received, int64_t now_ms);
    size_t bytes() const { return bytes_; }

   private:
    friend class BodyBudget;
    Ticket(std::shared_ptr<BodyBudget> budget, size_t bytes, int64_t now_ms,
           std::function<void()> cut);
    std::shared_ptr<BodyBudget> budget_;
    size_t bytes_;
    // Guarded by the budget's mutex.
    uint64_t received_ = 0;
    int64_t last_progress_ms_;
    std::function<void()> cut_;
    bool cutting_ = false;
    std::list<Ticket*>::iterator place_;
  };

  static std::shared_ptr<BodyBudget> Make(size_t limit_bytes) {
    return std::shared_ptr<BodyBudget>(new BodyBudget(limit_bytes));
  }

  // A ticket for `bytes`, or null when that would pass the cap; then the stalest senders are
  // cut (their `cut` is called, from this thread: it must only post) until `bytes` would fit
  // once they are gone. Senders that made progress in the last `min_stall_ms` are spared.
  std::shared_ptr<Ticket> Reserve(size_t bytes, int64_t now_ms, std::function<void()> cut,
                                  int64_t min_stall_ms = 1000);

  size_t limit() const { return limit_; }
  size_t held() const;
  uint64_t refused() const;
  uint64_t cut() const;

 private:
  explicit BodyBudget(size_t limit_bytes) : limit_(limit_bytes) {}
  void Release(Ticket& ticket);

  const size_t limit_;
  mutable std::mutex mu_;
  size_t held_ = 0;
  uint64_t refused_ = 0;
  uint64_t cut_ = 0;
  std::list<Ticket*> tickets_;  // every ticket alive, oldest first
};

// Makes glibc's malloc serve every block of 256 KiB or more with its own mapping, unmapped when
// freed. By default the threshold rises to the largest block freed so far (up to 32 MiB), so
// after the first big body was freed the next ones came from the heap and stayed in the
// process once freed: 40 stalled 16 MiB bodies left ~220 MB behind under a busy machine's
// timing. Budgeted bodies are over 64 KiB; once handled, their memory goes back at once.
// Call once at start-up, before the I/O threads (it also fixes the trim threshold).
void ReturnBigBlocksToTheSystem();

}  // namespace anteroom::http
