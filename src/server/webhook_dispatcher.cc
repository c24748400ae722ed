#include "server/webhook_dispatcher.h"

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include <map>

#include "common/random_id.h"
#include "server/event_feed.h"

namespace anteroom::server {

namespace json = boost::json;

std::string WebhookDeliveryJson(const store::LifecycleEvent& e) {
  return json::serialize(json::object{{"id", e.id.ToString()}, {"body", EventJson(e)}});
}

std::optional<WebhookDeliveryJob> ReadWebhookDelivery(std::string_view payload) {
  boost::system::error_code ec;
  json::value v = json::parse(payload, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::object& o = v.get_object();
  const json::value* id = o.if_contains("id");
  const json::value* body = o.if_contains("body");
  if (id == nullptr || !id->is_string() || body == nullptr || !body->is_string()) {
    return std::nullopt;
  }
  return WebhookDeliveryJob{std::string(id->get_string()), std::string(body->get_string())};
}

WebhookDispatcher::WebhookDispatcher(store::Backend& backend, boost::asio::io_context& io,
                                     WebhookDispatcherOptions options)
    : backend_(backend),
      io_(io),
      options_(options),
      holder_(NewRandomId()),
      follower_(backend, io, {.poll = options.tick}, [this] { Step(); }) {}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

void WebhookDispatcher::Start() { follower_.Start(); }

void WebhookDispatcher::Stop() { follower_.Stop(); }

// One step: webhooks read again when due; the role taken or renewed (a process that does not
// hold it stops here); then one read of events after the position, its deliveries pushed, and
// the position saved once all of them were.
void WebhookDispatcher::Step() {
  auto now = std::chrono::steady_clock::now();
  if (!reload_due_.exchange(false) && now - loaded_at_ < options_.reload) return HoldAndRead();
  loaded_at_ = now;
  backend_.ListConfig(std::string(kWebhookKind),
                      [this](OpResult<std::vector<store::ConfigEntry>> r) {
                        boost::asio::post(io_, [this, r = std::move(r)] {
                          if (r.ok()) {
                            webhooks_.clear();
                            for (const auto& e : *r) {
                              if (auto w = LoadWebhook(e)) webhooks_.push_back(std::move(*w));
                            }
                          } else {
                            reload_due_ = true;
                          }
                          HoldAndRead();
                        });
                      });
}

void WebhookDispatcher::HoldAndRead() {
  backend_.HoldRole(std::string(kDispatcherRole), holder_, options_.role_ttl_ms,
                    [this](OpResult<std::optional<std::string>> held) {
                      boost::asio::post(io_, [this, held = std::move(held)] {
                        if (!held.ok() || !*held) {
                          if (!held.ok()) ++counts_.failures;
                          holding_ = false;
                          return Done();
                        }
                        if (!holding_) {  // taken now: from the saved position, or from now on
                          holding_ = true;
                          after_ = store::EventId::Parse(**held);
                        }
                        backend_.ReadEvents(
                            after_, options_.batch, [this](OpResult<store::EventRead> r) {
                              boost::asio::post(io_, [this, r = std::move(r)]() mutable {
                                if (!r.ok()) {
                                  ++counts_.failures;
                                  return Done();
                                }
                                Dispatch(std::move(*r));
                              });
                            });
                      });
                    });
}

void WebhookDispatcher::Dispatch(store::EventRead read) {
  if (read.reset) {
    ++counts_.missed;
    spdlog::warn(
        "webhooks: events after {} were no longer kept when read: their deliveries are "
        "lost",
        after_ ? after_->ToString() : "the start");
  }
  std::map<std::string, std::vector<core::JobSpec>> jobs;  // by queue
  for (const store::LifecycleEvent& e : read.events) {
    for (const Webhook& w : webhooks_) {
      if (!w.Wants(e)) continue;
      core::JobSpec job;
      job.payload = WebhookDeliveryJson(e);
      job.dedupe_key = e.id.ToString();
      job.max_attempts = kWebhookAttempts;
      jobs[WebhookQueue(w.name)].push_back(std::move(job));
    }
  }
  bool full = read.events.size() >= options_.batch;
  store::EventId last = read.last;
  auto save = [this, last, full] {
    after_ = last;
    backend_.SaveRolePosition(std::string(kDispatcherRole), holder_, last.ToString(),
                              [this, full](OpResult<bool> saved) {
                                boost::asio::post(io_, [this, full, saved = std::move(saved)] {
                                  if (!saved.ok() || !*saved) holding_ = false;
                                  Done(full);
                                });
                              });
  };
  if (jobs.empty()) return save();
  auto left = std::make_shared<size_t>(jobs.size());
  auto failed = std::make_shared<bool>(false);
  for (auto& [name, list] : jobs) {
    size_t n = list.size();
    const std::string& queue = name;  // a name a lambda can capture (clang: not a binding)
    backend_.Push(queue, std::move(list),
                  [this, left, failed, save, n, queue](OpResult<std::vector<core::PushResult>> r) {
                    // Only a lost backend is worth another try; a refusal would be refused again,
                    // and would hold back every other webhook's deliveries with it.
                    bool retry = !r.ok() && r.status() == OpStatus::kUnavailable;
                    if (!r.ok() && !retry) {
                      spdlog::error(
                          "webhooks: {} deliveries to queue {} refused ({}): not delivered", n,
                          queue, r.message());
                    }
                    boost::asio::post(io_, [this, left, failed, save, n, ok = r.ok(), retry] {
                      if (ok) {
                        counts_.pushed += n;
                      } else if (retry) {
                        *failed = true;
                      } else {
                        counts_.refused += n;
                      }
                      if (--*left > 0) return;
                      if (*failed) {  // from the same position next time: repeats are deduped
                        ++counts_.failures;
                        return Done();
                      }
                      save();
                    });
                  });
  }
}

}  // namespace anteroom::server
