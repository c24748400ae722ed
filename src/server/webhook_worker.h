#pragma once
// Sends webhook deliveries (the jobs WebhookDispatcher pushes): for each enabled webhook, a
// loop that fetches from its queue (a long poll, at most `concurrency` deliveries in flight),
// signs and sends each (WebhookSender), then acks it when the receiver took it (2xx), or nacks
// it with the next delay of the retry schedule (WebhookRetryDelayMs) or the receiver's
// Retry-After (429, 503); after the last attempt the queue keeps it as a dead letter, to be
// redriven as any queue's. A 410 Gone disables the webhook (its deliveries wait in its queue
// until it is enabled again). Every process runs one: the queue hands each delivery to one of
// them at a time, and a process that dies mid-send loses nothing (its lease runs out).

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "server/webhook_settings.h"
#include "store/backend.h"
#include "webhook/sender.h"

namespace anteroom::server {

using webhook::WebhookOutcome;
using webhook::WebhookSender;

struct WebhookWorkerOptions {
  size_t concurrency = 8;                   // deliveries in flight per webhook per process
  int64_t lease_ms = 60'000;                // longer than a send may take (its timeout)
  int64_t poll_ms = 5'000;                  // a fetch waits this long for work
  std::chrono::milliseconds reload{2'000};  // webhooks are read again this often
};

// Counts for GET /metrics (all webhooks).
struct WebhookDeliveryCounts {
  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> failed{0};    // attempts that will be retried, or went dead
  std::atomic<uint64_t> disabled{0};  // webhooks disabled by a 410
};

class WebhookWorker {
 public:
  WebhookWorker(store::Backend& backend, const Clock& clock, boost::asio::io_context& io,
                WebhookSender& sender, std::string worker, WebhookWorkerOptions options = {});
  ~WebhookWorker();
  WebhookWorker(const WebhookWorker&) = delete;
  WebhookWorker& operator=(const WebhookWorker&) = delete;

  void Start();
  void Stop();
  const WebhookDeliveryCounts& counts() const { return counts_; }

 private:
  struct Loop {
    Webhook webhook;
    size_t inflight = 0;
    bool fetching = false;
    bool wanted = true;  // still set and enabled when last read
    // Acks wait here while one is being written, then go as one: at a thousand deliveries a
    // second that is one backend call for several, and a quiet queue's ack is not delayed.
    std::vector<std::string> unacked;
    bool acking = false;
  };
  void Reload();
  void Reloaded(const std::vector<store::ConfigEntry>* entries);
  void Fetch(const std::string& name);  // on the io_context
  void Send(const std::string& name, core::Delivery delivery);
  void Finish(const std::string& name, const core::Delivery& delivery, WebhookOutcome outcome);
  void AckUnacked(const std::string& name);
  void Settled(const std::string& name, size_t deliveries);
  void Disable(const std::string& name, std::string reason);

  store::Backend& backend_;
  const Clock& clock_;
  boost::asio::io_context& io_;
  WebhookSender& sender_;
  std::string worker_;
  WebhookWorkerOptions options_;
  boost::asio::steady_timer timer_;
  WebhookDeliveryCounts counts_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // On the io_context.
  bool stopped_ = false;
  std::map<std::string, Loop> loops_;
};

}  // namespace anteroom::server
