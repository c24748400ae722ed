#pragma once
// The admin event stream's readers (GET /v1/admin/events): each an event stream with its own
// position in the backend's event order and its own filter.
//
// A reader reads after its position on its stream's thread, one read at a time, and writes what
// the read found as SSE frames (`id:`, `event:`, `data:`); it reads again once they are written.
// So a slow consumer holds at most one read's frames in memory, and when it falls behind what the
// backend keeps it hears `event: reset` and goes on from the oldest event kept. Readers are woken
// when the backend says events were added (the embedded backend), at most every kWakeEvery,
// and in any case every poll interval (Redis: another process's events are not announced here).

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "http/live_stream.h"
#include "store/backend.h"
#include "store/lifecycle_event.h"

namespace anteroom::server {

// Which events a reader wants: empty lists take every type or every room. A queue's events
// pass the room filter only when it is empty.
struct EventFilter {
  std::vector<std::string> types;
  std::vector<std::string> rooms;
  bool Matches(const store::LifecycleEvent& e) const;
};

// One event as the stream's `data:` and a webhook's body carry it: {id, type, time, time_ms,
// room|queue, seq, data: {session, position, admission, job, detail as they apply}}.
std::string EventJson(const store::LifecycleEvent& e);
// The SSE frame of one event: "id: ID\nevent: TYPE\ndata: JSON\n\n".
std::string EventFrame(const store::LifecycleEvent& e);

struct EventFeedOptions {
  std::chrono::milliseconds poll{1'000};  // a reader reads at least this often
  size_t batch = 500;                     // events per read
};

class EventFeed {
 public:
  static constexpr std::chrono::milliseconds kWakeEvery{20};

  EventFeed(store::Backend& backend, boost::asio::io_context& timers, EventFeedOptions options);
  ~EventFeed();
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  void Start();
  void Stop();
  // `after`: the client's Last-Event-ID (nullopt: from now on). Call on the stream's thread, as
  // the route hands the stream over.
  void Attach(std::shared_ptr<http::LiveStream> stream, std::optional<store::EventId> after,
              EventFilter filter);
  size_t readers() const;

 private:
  class Reader;
  void Wake();  // any thread
  void Tick();  // on the timers' context
  void WakeAll();

  store::Backend& backend_;
  boost::asio::steady_timer tick_;
  boost::asio::steady_timer wake_;
  EventFeedOptions options_;
  std::atomic<bool> wake_pending_ = false;
  std::atomic<bool> stopped_ = false;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Reader>> readers_;  // ended ones are dropped as others come
  // What the backend's watcher calls: it may outlive this feed, which then unsets it.
  struct WakeTarget {
    std::mutex mu;
    EventFeed* feed = nullptr;
  };
  std::shared_ptr<WakeTarget> target_;
};

}  // namespace anteroom::server
