#include "server/event_follower.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <mutex>

namespace anteroom::server {

// What the backend's watcher holds: it may call after Stop, from any thread.
struct EventFollower::WakeTarget {
  std::mutex mu;
  EventFollower* follower = nullptr;
};

EventFollower::EventFollower(store::Backend& backend, boost::asio::io_context& io,
                             EventFollowerOptions options, std::function<void()> step,
                             std::function<bool()> woken)
    : backend_(backend),
      io_(io),
      options_(options),
      step_(std::move(step)),
      woken_(std::move(woken)),
      timer_(io),
      target_(std::make_shared<WakeTarget>()) {
  target_->follower = this;
}

EventFollower::~EventFollower() {
  std::lock_guard lock(target_->mu);
  target_->follower = nullptr;
}

void EventFollower::Start() {
  backend_.WatchEvents([target = target_] {
    std::lock_guard lock(target->mu);
    if (target->follower != nullptr) target->follower->Wake();
  });
  boost::asio::post(io_, [this] { Step(); });
}

void EventFollower::Stop() {
  {
    std::lock_guard lock(target_->mu);
    target_->follower = nullptr;
  }
  boost::asio::post(io_, [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

void EventFollower::Wake() {
  if (woken_ && !woken_()) return;
  if (wake_pending_.exchange(true)) return;
  boost::asio::post(io_, [this] {
    wake_pending_ = false;
    Woken();
  });
}

void EventFollower::Woken() {
  if (stopped_) return;
  if (busy_) {
    again_ = true;
    return;
  }
  Time at = std::max(std::chrono::steady_clock::now(), last_step_ + options_.min_gap);
  if (at < due_) RunAt(at);
}

// Re-arming cancels the wait armed before, whose handler then does nothing.
void EventFollower::RunAt(Time at) {
  due_ = at;
  timer_.expires_at(at);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec && !stopped_) Step();
  });
}

void EventFollower::Step() {
  if (stopped_ || busy_) return;
  busy_ = true;
  due_ = Time::max();
  last_step_ = std::chrono::steady_clock::now();
  step_();
}

void EventFollower::Done(bool again) {
  busy_ = false;
  if (stopped_) return;
  if (again) {
    again_ = false;
    boost::asio::post(io_, [this] { Step(); });
  } else if (again_) {
    again_ = false;
    RunAt(last_step_ + options_.min_gap);
  } else {
    RunAt(std::chrono::steady_clock::now() + options_.poll);
  }
}

}  // namespace anteroom::server
