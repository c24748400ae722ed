#pragma once
// The loop of a reader that follows the backend's event order (the webhook dispatcher, the ETA
// tracer's reader): it runs the reader's step on `io`, one at a time, when this process added
// events (Backend::WatchEvents) and in any case every `poll` (a backend shared by processes does
// not announce the others' events).
//
// Events come with every join and every admission, thousands a second: a step runs at most
// once every `min_gap` for them, so each reads and handles a batch, and a wake costs one posted
// handler at most, however many events announced it.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "store/backend.h"

namespace anteroom::server {

struct EventFollowerOptions {
  std::chrono::milliseconds poll{1'000};  // a step runs at least this often
  std::chrono::milliseconds min_gap{20};  // and, woken by events, at most this often
};

class EventFollower {
 public:
  // `step` runs on `io` and ends with a call of Done, on `io` too. `woken` (any thread, must
  // not block) says whether events are worth a step now; when it says no, only polls run.
  EventFollower(store::Backend& backend, boost::asio::io_context& io, EventFollowerOptions options,
                std::function<void()> step, std::function<bool()> woken = {});
  ~EventFollower();
  EventFollower(const EventFollower&) = delete;
  EventFollower& operator=(const EventFollower&) = delete;

  void Start();  // any thread
  void Stop();   // any thread; a step under way still ends with Done
  // The step is over. `again`: its read was full, step again at once.
  void Done(bool again);

 private:
  using Time = std::chrono::steady_clock::time_point;
  struct WakeTarget;
  void Wake();  // any thread
  void Woken();
  void RunAt(Time at);
  void Step();

  store::Backend& backend_;
  boost::asio::io_context& io_;
  EventFollowerOptions options_;
  std::function<void()> step_;
  std::function<bool()> woken_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<WakeTarget> target_;
  std::atomic<bool> wake_pending_ = false;
  // On io.
  bool busy_ = false;   // a step is under way
  bool again_ = false;  // woken during it
  bool stopped_ = false;
  Time last_step_{};
  Time due_ = Time::max();  // when the armed wait runs a step (max: none armed)
};

}  // namespace anteroom::server
