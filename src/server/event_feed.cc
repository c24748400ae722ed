#include "server/event_feed.h"

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include <algorithm>

#include "common/wire_time.h"

namespace anteroom::server {

namespace json = boost::json;

bool EventFilter::Matches(const store::LifecycleEvent& e) const {
  if (!types.empty() && std::find(types.begin(), types.end(), e.type) == types.end()) return false;
  if (rooms.empty()) return true;
  return !e.room.empty() && std::find(rooms.begin(), rooms.end(), e.room) != rooms.end();
}

std::string EventJson(const store::LifecycleEvent& e) {
  json::object o;
  o["id"] = e.id.ToString();
  o["type"] = e.type;
  o["time"] = FormatRfc3339Ms(e.at_ms);
  o["time_ms"] = e.at_ms;
  if (!e.room.empty()) {
    o["room"] = e.room;
    o["seq"] = e.seq;
  }
  if (!e.queue.empty()) o["queue"] = e.queue;
  json::object data;
  if (!e.session.empty()) data["session"] = e.session;
  if (e.position) data["position"] = *e.position;
  if (e.admission) data["admission"] = *e.admission;
  if (e.job) data["job"] = std::to_string(*e.job);
  if (!e.detail.empty()) data["detail"] = e.detail;
  o["data"] = std::move(data);
  return json::serialize(o);
}

std::string EventFrame(const store::LifecycleEvent& e) {
  return fmt::format("id: {}\nevent: {}\ndata: {}\n\n", e.id.ToString(), e.type, EventJson(e));
}

// ---- one reader ------------------------------------------------------------------------------

class EventFeed::Reader : public std::enable_shared_from_this<Reader> {
 public:
  Reader(store::Backend& backend, std::shared_ptr<http::LiveStream> stream,
         std::optional<store::EventId> after, EventFilter filter, size_t batch)
      : backend_(backend),
        stream_(std::move(stream)),
        after_(after),
        filter_(std::move(filter)),
        batch_(batch) {}

  // On the stream's thread, as the stream is handed over (before it can have ended, so its
  // end is always heard).
  void Start() {
    std::weak_ptr<Reader> weak = shared_from_this();
    stream_->OnDrained([weak] {
      if (auto r = weak.lock()) r->PullHere();
    });
    stream_->OnClosed([weak] {
      if (auto r = weak.lock()) r->ended_ = true;
    });
    PullHere();
  }
  // Any thread.
  void Pull() {
    boost::asio::post(stream_->executor(), [self = shared_from_this()] { self->PullHere(); });
  }
  bool ended() const { return ended_.load(std::memory_order_relaxed); }

 private:
  // On the stream's thread. One read at a time, and none while frames wait to be written.
  void PullHere() {
    if (ended_) return;
    if (reading_ || stream_->queued() > 0) return;  // the drain or the answer reads again
    reading_ = true;
    backend_.ReadEvents(
        after_, batch_, [self = shared_from_this()](OpResult<store::EventRead> r) mutable {
          auto& stream = self->stream_;
          boost::asio::post(
              stream->executor(),
              [self = std::move(self), r = std::move(r)]() mutable { self->Got(std::move(r)); });
        });
  }

  void Got(OpResult<store::EventRead> r) {
    reading_ = false;
    if (ended_ || !r.ok()) return;  // a lost backend: the next wake or poll reads again
    bool wrote = false;
    if (r->reset) {
      stream_->Enqueue(fmt::format(
          "event: reset\ndata: {{\"type\":\"reset\",\"after\":\"{}\",\"reason\":\"events "
          "after the position asked for are no longer kept\"}}\n\n",
          after_ ? after_->ToString() : ""));
      wrote = true;
    }
    for (const store::LifecycleEvent& e : r->events) {
      if (!filter_.Matches(e)) continue;
      stream_->Enqueue(EventFrame(e));
      wrote = true;
    }
    after_ = r->last;
    // Nothing written means no drain to read again on: when the read was full, read on now.
    if (!wrote && r->events.size() >= batch_) PullHere();
  }

  store::Backend& backend_;
  std::shared_ptr<http::LiveStream> stream_;
  std::optional<store::EventId> after_;
  EventFilter filter_;
  size_t batch_;
  bool reading_ = false;
  std::atomic<bool> ended_ = false;  // set on the stream's thread, read by the feed's
};

// ---- the feed --------------------------------------------------------------------------------

EventFeed::EventFeed(store::Backend& backend, boost::asio::io_context& timers,
                     EventFeedOptions options)
    : backend_(backend),
      tick_(timers),
      wake_(timers),
      options_(options),
      target_(std::make_shared<WakeTarget>()) {
  target_->feed = this;
}

EventFeed::~EventFeed() { Stop(); }

void EventFeed::Start() {
  backend_.WatchEvents([target = target_] {
    std::lock_guard lock(target->mu);
    if (target->feed != nullptr) target->feed->Wake();
  });
  Tick();
}

void EventFeed::Stop() {
  {
    std::lock_guard lock(target_->mu);
    target_->feed = nullptr;
  }
  stopped_ = true;
  tick_.cancel();
  wake_.cancel();
}

void EventFeed::Attach(std::shared_ptr<http::LiveStream> stream,
                       std::optional<store::EventId> after, EventFilter filter) {
  stream->SendFramesAsIs();
  auto reader = std::make_shared<Reader>(backend_, std::move(stream), after, std::move(filter),
                                         options_.batch);
  {
    std::lock_guard lock(mu_);
    std::erase_if(readers_, [](const std::shared_ptr<Reader>& r) { return r->ended(); });
    readers_.push_back(reader);
  }
  reader->Start();
}

size_t EventFeed::readers() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(
      std::count_if(readers_.begin(), readers_.end(), [](const auto& r) { return !r->ended(); }));
}

// Many appends in a burst wake the readers once per kWakeEvery. Called on the backend's threads:
// the timer is set on its own context.
void EventFeed::Wake() {
  if (stopped_ || wake_pending_.exchange(true)) return;
  boost::asio::post(wake_.get_executor(), [this] {
    wake_.expires_after(kWakeEvery);
    wake_.async_wait([this](const boost::system::error_code& ec) {
      wake_pending_ = false;
      if (!ec && !stopped_) WakeAll();
    });
  });
}

void EventFeed::Tick() {
  if (stopped_) return;
  WakeAll();
  tick_.expires_after(options_.poll);
  tick_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Tick();
  });
}

void EventFeed::WakeAll() {
  std::vector<std::shared_ptr<Reader>> live;
  {
    std::lock_guard lock(mu_);
    std::erase_if(readers_, [](const std::shared_ptr<Reader>& r) { return r->ended(); });
    live = readers_;
  }
  for (auto& r : live) r->Pull();
}

}  // namespace anteroom::server
