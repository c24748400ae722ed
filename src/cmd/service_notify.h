#pragma once
// Tells a service manager (systemd, `Type=notify`) how the server is, through libsystemd's
// sd_notify: READY=1 once it recovered its state and listens, WATCHDOG=1 keep-alives while
// every event loop keeps turning, STOPPING=1 when it begins to stop. Without $NOTIFY_SOCKET
// (not started by systemd) every call does nothing.
//
// The keep-alive proves more than the process being alive: each I/O thread's loop checks in
// on a timer of its own, and a keep-alive goes out only when all of them did since the last
// one. A loop stuck in a handler (a busy loop, a blocking call) stops the keep-alives, and
// systemd restarts the server after `WatchdogSec`.

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

#include "http/io_pool.h"

namespace anteroom::cmd {

class ServiceNotifier {
 public:
  explicit ServiceNotifier(http::IoPool& pool);
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  // READY=1 with a STATUS= line, and the keep-alives start (when systemd asked for them).
  void Ready(std::string_view status);
  // STOPPING=1; the keep-alives stop.
  void Stopping(std::string_view status);
  // The keep-alive period: half of what systemd gives (WATCHDOG_USEC), zero when it gives none.
  std::chrono::microseconds keepalive_period() const { return period_; }

 private:
  struct Loop;
  void ArmCheckIn(Loop& loop);
  void ArmKeepAlive();

  http::IoPool& pool_;
  std::chrono::microseconds period_{0};
  std::vector<std::unique_ptr<Loop>> loops_;
  std::unique_ptr<boost::asio::steady_timer> keepalive_;
  std::atomic<bool> stopping_{false};
};

}  // namespace anteroom::cmd
