#include "cmd/service_notify.h"

#include <systemd/sd-daemon.h>

#include <spdlog/spdlog.h>

#include <string>

namespace anteroom::cmd {

// One I/O thread's loop: its timer sets `turned` each time the loop runs it.
struct ServiceNotifier::Loop {
  explicit Loop(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
  std::atomic<bool> turned{true};
};

namespace {

void Notify(const std::string& state) {
  // unset_environment 0: a child the server starts (none today) could notify too.
  int r = sd_notify(0, state.c_str());
  if (r < 0) spdlog::warn("sd_notify({}): {}", state.substr(0, state.find('\n')), r);
}

}  // namespace

ServiceNotifier::ServiceNotifier(http::IoPool& pool) : pool_(pool) {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    // Twice per WatchdogSec, as sd_watchdog_enabled(3) advises; a loop that missed one
    // check-in still lets the next keep-alive out in time.
    period_ = std::chrono::microseconds(usec / 2);
  }
}

ServiceNotifier::~ServiceNotifier() { stopping_ = true; }

void ServiceNotifier::Ready(std::string_view status) {
  Notify("READY=1\nSTATUS=" + std::string(status));
  if (period_.count() == 0) return;
  for (boost::asio::io_context* io : pool_.Contexts()) {
    loops_.push_back(std::make_unique<Loop>(*io));
    ArmCheckIn(*loops_.back());
  }
  keepalive_ = std::make_unique<boost::asio::steady_timer>(pool_.Main());
  ArmKeepAlive();
}

void ServiceNotifier::Stopping(std::string_view status) {
  // The other loops' timers see the flag (cancelling them from this thread would race).
  stopping_ = true;
  if (keepalive_) keepalive_->cancel();
  Notify("STOPPING=1\nSTATUS=" + std::string(status));
}

void ServiceNotifier::ArmCheckIn(Loop& loop) {
  loop.timer.expires_after(period_ / 2);
  loop.timer.async_wait([this, &loop](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    loop.turned.store(true, std::memory_order_relaxed);
    ArmCheckIn(loop);
  });
}

void ServiceNotifier::ArmKeepAlive() {
  keepalive_->expires_after(period_);
  keepalive_->async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    bool all = true;
    for (auto& loop : loops_) {
      if (!loop->turned.exchange(false, std::memory_order_relaxed)) all = false;
    }
    if (all) {
      Notify("WATCHDOG=1");
    } else {
      spdlog::warn("an event loop did not turn within {} ms: no watchdog keep-alive",
                   period_.count() / 1000);
    }
    ArmKeepAlive();
  });
}

}  // namespace anteroom::cmd
