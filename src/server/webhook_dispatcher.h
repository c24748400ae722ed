#pragma once
// Turns lifecycle events into webhook deliveries: each event a webhook wants (Webhook::Wants)
// becomes one job of the webhook's queue (WebhookQueue), whose payload is the delivery
// (WebhookDeliveryJson) and whose dedupe key is the event id, so pushing it again while it waits
// makes no second job. The delivery worker (webhook_worker.h) sends the jobs.
//
// One process dispatches for all that share a backend: it holds the backend's role
// "webhook-dispatcher" (Backend::HoldRole, renewed every tick) and saves its position in the
// event order after each batch it pushed, so the next holder (after a crash) goes on from there:
// at least once, and a repeat is the same job while the first still waits. The embedded backend
// keeps events in memory only: after its restart the dispatcher starts from the newest event.
// Events read while no webhook wants them are passed over, not kept for a webhook made later.

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "server/event_follower.h"
#include "server/webhook_settings.h"
#include "store/backend.h"

namespace anteroom::server {

inline constexpr std::string_view kDispatcherRole = "webhook-dispatcher";

// A delivery job's payload: {"id": the event id (webhook-id), "body": the event as the stream's
// data (EventJson)}. Read back by ReadWebhookDelivery (nullopt: not one).
struct WebhookDeliveryJob {
  std::string id;
  std::string body;
};
std::string WebhookDeliveryJson(const store::LifecycleEvent& e);
std::optional<WebhookDeliveryJob> ReadWebhookDelivery(std::string_view payload);

struct WebhookDispatcherOptions {
  std::chrono::milliseconds tick{500};      // reads at least this often (and when woken)
  std::chrono::milliseconds reload{2'000};  // webhooks are read again this often
  int64_t role_ttl_ms = 10'000;
  size_t batch = 500;
};

// Counts for GET /metrics.
struct WebhookDispatchCounts {
  std::atomic<uint64_t> pushed{0};    // delivery jobs pushed (a dedupe hit counts too)
  std::atomic<uint64_t> missed{0};    // times events were gone before they were read (a reset)
  std::atomic<uint64_t> failures{0};  // reads or pushes that failed (retried)
  // Deliveries a queue refused for good (e.g. --max-queues reached): logged and passed over,
  // so that one webhook's queue does not hold back every other webhook's deliveries.
  std::atomic<uint64_t> refused{0};
};

class WebhookDispatcher {
 public:
  WebhookDispatcher(store::Backend& backend, boost::asio::io_context& io,
                    WebhookDispatcherOptions options = {});
  ~WebhookDispatcher();
  WebhookDispatcher(const WebhookDispatcher&) = delete;
  WebhookDispatcher& operator=(const WebhookDispatcher&) = delete;

  void Start();
  void Stop();
  // Webhooks changed (this process's routes): read them again before the next batch.
  void Reload() { reload_due_ = true; }
  const WebhookDispatchCounts& counts() const { return counts_; }

 private:
  void Step();  // on the io_context: one step of the loop (EventFollower runs it)
  void HoldAndRead();
  void Done(bool again = false) { follower_.Done(again); }
  void Dispatch(store::EventRead read);

  store::Backend& backend_;
  boost::asio::io_context& io_;
  WebhookDispatcherOptions options_;
  std::string holder_;
  WebhookDispatchCounts counts_;
  // On the io_context.
  bool holding_ = false;
  std::optional<store::EventId> after_;  // the position (holding_ only)
  std::vector<Webhook> webhooks_;
  std::chrono::steady_clock::time_point loaded_at_{};
  std::atomic<bool> reload_due_{true};
  EventFollower follower_;  // last: it runs Step until it is destroyed
};

}  // namespace anteroom::server
