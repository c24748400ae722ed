#pragma once
// A client that may hang up while its request waits (a parked long poll). The HTTP layer
// calls Signal() when the connection reads EOF or fails; whoever parks the request registers,
// with OnHangup, what to do then (drop the waiter, so no job is handed to a socket nobody
// reads). Release() ends the wait the other way: the server is draining, so the request is
// answered now with what it has (a fetch: its acks and no job), and the client, still there,
// reads that answer. Thread-safe: the connection and the backend may run on different threads.

#include <functional>
#include <memory>
#include <mutex>

namespace anteroom {

class Hangup {
 public:
  // The client is gone (Signal): nothing handed to it would be read.
  bool happened() const {
    std::lock_guard lock(mu_);
    return happened_;
  }
  // The server let the wait go (Release): answer at once, as if its time were up.
  bool released() const {
    std::lock_guard lock(mu_);
    return released_;
  }

  // Runs `f` once the client hangs up or the wait is released: now (on this thread) when either
  // already happened, else on the thread that calls Signal() or Release(). Replaces any earlier
  // callback. `f` must not block.
  void OnHangup(std::function<void()> f) {
    {
      std::lock_guard lock(mu_);
      if (!happened_ && !released_) {
        callback_ = std::move(f);
        return;
      }
    }
    f();
  }

  // The request was answered: whatever was registered is no longer wanted.
  void Clear() {
    std::function<void()> dropped;
    std::lock_guard lock(mu_);
    dropped.swap(callback_);
  }

  void Signal() { End(&Hangup::happened_); }
  void Release() { End(&Hangup::released_); }

 private:
  // The callback runs once, for whichever comes first.
  void End(bool Hangup::*which) {
    std::function<void()> f;
    {
      std::lock_guard lock(mu_);
      if (happened_ || released_) return;
      this->*which = true;
      f.swap(callback_);
    }
    if (f) f();
  }

  mutable std::mutex mu_;
  bool happened_ = false;
  bool released_ = false;
  std::function<void()> callback_;
};

}  // namespace anteroom
