#pragma once
// The last 15 minutes of every room's and queue's numbers, for the dashboard's charts
// (GET /v1/stats/history). StatsHistory keeps the samples, a ring buffer per room and per
// queue; StatsSampler reads the backend every interval on a timer and feeds it.
//
// Memory: about 56 bytes per room sample and 72 per queue sample, up to (15 min / interval) + 1
// of each per room or queue (181 at the default 5 s), growing as samples are taken.

#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "core/queue_types.h"
#include "core/room_types.h"
#include "store/backend.h"

namespace anteroom::server {

struct RoomSample {
  int64_t t = 0;  // ms since the epoch
  int64_t active = 0;
  int64_t waiting = 0;
  int64_t capacity = 0;
  bool paused = false;
  int64_t admitted_total = 0;
  int64_t dropped_total = 0;
  int64_t released_total = 0;
};

struct QueueSample {
  int64_t t = 0;
  int64_t ready = 0;
  int64_t inflight = 0;
  int64_t delayed = 0;
  int64_t dead = 0;
  int64_t pushed_total = 0;
  int64_t acked_total = 0;
  int64_t nacked_total = 0;
  int64_t expired_total = 0;
};

// The latest `capacity` values, oldest dropped first. Space grows with the values pushed, so a
// room or queue made a minute ago costs a minute of samples, not the whole window.
template <typename T>
class SampleRing {
 public:
  explicit SampleRing(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}
  void Push(const T& value) {
    if (slots_.size() < capacity_) {
      slots_.push_back(value);
      return;
    }
    slots_[first_] = value;
    first_ = (first_ + 1) % capacity_;
  }
  size_t size() const { return slots_.size(); }
  // i = 0 is the oldest.
  const T& operator[](size_t i) const { return slots_[(first_ + i) % slots_.size()]; }

 private:
  std::vector<T> slots_;
  size_t capacity_;
  size_t first_ = 0;  // the oldest, once full
};

// Which rows one GET /v1/stats/history answers: at most `limit` rooms and `limit` queues, in
// name order, after the names given (docs/api.md). A page, so one request's work is bounded
// however many rooms and queues there are.
struct HistoryPage {
  static constexpr size_t kDefaultLimit = 20;
  static constexpr size_t kMaxLimit = 100;
  size_t limit = kDefaultLimit;
  bool rooms = true;  // false: no rooms at all (a page of queues only)
  bool queues = true;
  std::string room_after;   // "" = from the first
  std::string queue_after;  // "" = from the first
};

// Thread-safe: samples are added from the backend's completions and read by handlers.
class StatsHistory {
 public:
  static constexpr int64_t kWindowMs = 15 * 60 * 1000;

  explicit StatsHistory(int64_t interval_ms);

  int64_t interval_ms() const { return interval_ms_; }
  // Samples kept per room or queue: the window and one more, so they span all of it.
  size_t capacity() const { return capacity_; }

  // One sample of every room listed, taken at t; rooms not listed are gone and forgotten.
  void AddRooms(int64_t t, const std::vector<core::RoomInfo>& rooms);
  void AddQueues(int64_t t, const std::vector<std::pair<std::string, core::QueueStats>>& queues);

  // {"interval_ms", "now_ms", "rooms": [{"room", "samples": [...]}], "queues": [...],
  // "rooms_total", "queues_total", "next": {"room_after", "queue_after"}}: one page of names in
  // order, samples oldest first (docs/api.md). The lock is held only to copy the page's samples.
  boost::json::object ToJson(int64_t now_ms, const HistoryPage& page = {}) const;

 private:
  const int64_t interval_ms_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, SampleRing<RoomSample>, std::less<>> rooms_;    // guarded by mu_
  std::map<std::string, SampleRing<QueueSample>, std::less<>> queues_;  // guarded by mu_
};

// Samples the backend into a history every interval, on a timer of one io_context (the pool's
// main one). A slow backend delays the next sample instead of overlapping it. Declare it after
// the backend: it must stop before the backend goes.
class StatsSampler {
 public:
  StatsSampler(boost::asio::io_context& io, store::Backend& backend, const Clock& clock,
               StatsHistory& history);
  ~StatsSampler();  // Stop()
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;

  // Also called with every list of rooms sampled (on the io_context's thread): what else
  // follows the rooms of every process (the rooms' target origins). Set before Start.
  void OnRooms(std::function<void(const std::vector<core::RoomInfo>&)> fn);
  // The first sample right away (once the io_context runs), then one every interval.
  void Start();
  // No sample starts after this; one under way is dropped. Call it on the io_context's thread,
  // or once the io_context no longer runs.
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace anteroom::server
