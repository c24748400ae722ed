#pragma once
// A client that may hang up while its request waits (a parked long poll). The HTTP layer
// calls Signal() when the connection reads EOF or fails; whoever parks the request registers,
// with OnHangup, what to do then (drop the waiter, so no job is handed to a socket nobody
// reads). Thread-safe: the connection and the backend may run on different threads.

#include <functional>
#include <memory>
#include <mutex>

namespace anteroom {

class Hangup {
 public:
  bool happened() const {
    std::lock_guard lock(mu_);
    return happened_;
  }

  // Runs `f` once the client hangs up: now (on this thread) when it already has, else on the
  // thread that calls Signal(). Replaces any earlier callback. `f` must not block.
  void OnHangup(std::function<void()> f) {
    {
      std::lock_guard lock(mu_);
      if (!happened_) {
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

  void Signal() {
    std::function<void()> f;
    {
      std::lock_guard lock(mu_);
      if (happened_) return;
      happened_ = true;
      f.swap(callback_);
    }
    if (f) f();
  }

 private:
  mutable std::mutex mu_;
  bool happened_ = false;
  std::function<void()> callback_;
};

}  // namespace anteroom
