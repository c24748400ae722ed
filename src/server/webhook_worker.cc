#include "server/webhook_worker.h"

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <algorithm>

#include "server/webhook_dispatcher.h"

namespace anteroom::server {

WebhookWorker::WebhookWorker(store::Backend& backend, const Clock& clock,
                             boost::asio::io_context& io, WebhookSender& sender, std::string worker,
                             WebhookWorkerOptions options)
    : backend_(backend),
      clock_(clock),
      io_(io),
      sender_(sender),
      worker_(std::move(worker)),
      options_(options),
      timer_(io) {}

WebhookWorker::~WebhookWorker() { *alive_ = false; }

void WebhookWorker::Start() {
  boost::asio::post(io_, [this] { Reload(); });
}

void WebhookWorker::Stop() {
  boost::asio::post(io_, [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

// Reads the webhooks; starts a loop for each enabled one, and lets the others' loops run down.
void WebhookWorker::Reload() {
  if (stopped_) return;
  backend_.ListConfig(
      std::string(kWebhookKind), [this](OpResult<std::vector<store::ConfigEntry>> r) {
        std::shared_ptr<std::vector<store::ConfigEntry>> entries;
        if (r.ok()) entries = std::make_shared<std::vector<store::ConfigEntry>>(std::move(*r));
        boost::asio::post(io_, [this, entries] { Reloaded(entries.get()); });
      });
}

// `entries`: the webhooks as just read (null: the read failed; the loops go on as they were).
void WebhookWorker::Reloaded(const std::vector<store::ConfigEntry>* entries) {
  if (stopped_) return;
  if (entries != nullptr) {
    for (auto& [name, loop] : loops_) loop.wanted = false;
    for (const store::ConfigEntry& e : *entries) {
      std::optional<Webhook> w = LoadWebhook(e);
      if (!w || w->disabled_at_ms) continue;
      Loop& loop = loops_[w->name];
      loop.webhook = std::move(*w);
      loop.wanted = true;
      Fetch(loop.webhook.name);
    }
    std::erase_if(loops_, [](const auto& kv) {
      return !kv.second.wanted && kv.second.inflight == 0 && !kv.second.fetching;
    });
  }
  timer_.expires_after(options_.reload);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Reload();
  });
}

void WebhookWorker::Fetch(const std::string& name) {
  auto it = loops_.find(name);
  if (stopped_ || it == loops_.end()) return;
  Loop& loop = it->second;
  if (!loop.wanted || loop.fetching || loop.inflight >= options_.concurrency) return;
  loop.fetching = true;
  core::FetchRequest request{.worker = worker_,
                             .max = options_.concurrency - loop.inflight,
                             .lease_ms = options_.lease_ms,
                             .wait_ms = options_.poll_ms,
                             .ack = {},
                             .ack_results = {},
                             .hangup = {}};
  backend_.Fetch(WebhookQueue(name), std::move(request),
                 [this, name, alive = alive_](OpResult<core::FetchAnswer> r) {
                   if (!*alive) return;
                   boost::asio::post(io_, [this, name, r = std::move(r)]() mutable {
                     auto it = loops_.find(name);
                     if (it == loops_.end()) return;
                     it->second.fetching = false;
                     if (!r.ok()) {
                       // A lost backend: the next reload fetches again.
                       spdlog::warn("webhook {}: fetch failed: {}", name, r.message());
                       return;
                     }
                     for (core::Delivery& d : r->jobs) {
                       ++it->second.inflight;
                       Send(name, std::move(d));
                     }
                     Fetch(name);
                   });
                 });
}

void WebhookWorker::Send(const std::string& name, core::Delivery delivery) {
  const Loop& loop = loops_.at(name);
  std::optional<WebhookDeliveryJob> job = ReadWebhookDelivery(delivery.payload);
  if (!job) {  // not a delivery (pushed by hand): a dead letter at once is not possible, so retry
    return Finish(name, delivery,
                  {.kind = WebhookOutcome::Kind::kRefused,
                   .status = 0,
                   .retry_after_ms = std::nullopt,
                   .body_bytes = 0,
                   .error = "not a webhook delivery"});
  }
  webhook::WebhookDelivery out{.url = loop.webhook.url,
                               .id = job->id,
                               .timestamp_s = clock_.NowMs() / 1000,
                               .body = std::move(job->body),
                               .secrets = loop.webhook.SigningSecrets(clock_.NowMs())};
  sender_.Send(std::move(out), [this, name, delivery = std::move(delivery),
                                alive = alive_](WebhookOutcome outcome) mutable {
    if (!*alive) return;
    boost::asio::post(io_, [this, name, delivery = std::move(delivery),
                            outcome = std::move(outcome)] { Finish(name, delivery, outcome); });
  });
}

void WebhookWorker::Finish(const std::string& name, const core::Delivery& delivery,
                           WebhookOutcome outcome) {
  using Kind = WebhookOutcome::Kind;
  if (outcome.kind == Kind::kDelivered || outcome.kind == Kind::kGone) {
    if (outcome.kind == Kind::kDelivered) {
      ++counts_.delivered;
    } else {
      Disable(name, "the receiver answered " + std::to_string(outcome.status) + " Gone");
    }
    auto it = loops_.find(name);
    if (it == loops_.end()) return;  // not possible: a loop with deliveries out is kept
    it->second.unacked.push_back(delivery.lease);
    if (!it->second.acking) AckUnacked(name);
    return;
  }
  ++counts_.failed;
  int64_t delay = outcome.retry_after_ms.value_or(WebhookRetryDelayMs(delivery.attempt));
  std::string error = outcome.status > 0 ? "HTTP " + std::to_string(outcome.status) +
                                               (outcome.error.empty() ? "" : ": " + outcome.error)
                                         : outcome.error;
  backend_.Nack(WebhookQueue(name), {delivery.lease}, delay, std::move(error),
                [this, name, alive = alive_](auto) {
                  if (!*alive) return;
                  boost::asio::post(io_, [this, name] { Settled(name, 1); });
                });
}

// Acks every delivery taken since the last ack was sent, in one call. A lost backend leaves
// them leased: their leases run out and the queue hands them out again (at least once).
void WebhookWorker::AckUnacked(const std::string& name) {
  Loop& loop = loops_.at(name);
  std::vector<std::string> leases = std::move(loop.unacked);
  loop.unacked.clear();
  loop.acking = true;
  size_t n = leases.size();
  backend_.Ack(WebhookQueue(name), std::move(leases), [this, name, n, alive = alive_](auto) {
    if (!*alive) return;
    boost::asio::post(io_, [this, name, n] {
      auto it = loops_.find(name);
      if (it == loops_.end()) return;
      it->second.acking = false;
      if (!it->second.unacked.empty()) AckUnacked(name);
      Settled(name, n);
    });
  });
}

// `deliveries` are acked or nacked: room for as many more.
void WebhookWorker::Settled(const std::string& name, size_t deliveries) {
  auto it = loops_.find(name);
  if (it == loops_.end()) return;
  it->second.inflight -= std::min(it->second.inflight, deliveries);
  Fetch(name);
}

void WebhookWorker::Disable(const std::string& name, std::string reason) {
  ++counts_.disabled;
  auto it = loops_.find(name);
  if (it != loops_.end()) it->second.wanted = false;
  spdlog::warn("webhook {}: disabled: {}", name, reason);
  backend_.ListConfig(std::string(kWebhookKind), [this, name, reason = std::move(reason),
                                                  alive = alive_](
                                                     OpResult<std::vector<store::ConfigEntry>> r) {
    if (!*alive || !r.ok()) return;
    std::vector<store::ConfigEntry> entries = std::move(*r);
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const store::ConfigEntry& e) { return e.name == name; });
    if (it == entries.end()) return;
    std::optional<Webhook> w = LoadWebhook(*it);
    if (!w || w->disabled_at_ms) return;
    w->disabled_at_ms = clock_.NowMs();
    w->disabled_reason = reason;
    backend_.PutConfig({std::string(kWebhookKind), name, StoreWebhook(*w)}, [](OpResult<Done>) {});
  });
}

}  // namespace anteroom::server
