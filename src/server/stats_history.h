#pragma once
// The last hour of every room's and queue's numbers, for the dashboard's charts
// (GET /v1/stats/history). StatsHistory keeps the samples, two ring buffers per room and per
// queue: every sample of the last 15 minutes, and one a minute for the hour; StatsSampler reads
// the backend every interval on a timer and feeds it, with the rooms' ETA errors (EtaTracer).
//
// Memory: 72 bytes per room sample and 72 per queue sample, up to (15 min / interval) + 1 of
// each per room or queue (181 at the default 5 s) plus 61 one-minute ones: about 17 KiB per room
// or queue at 5 s, growing as samples are taken.

#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "core/queue_types.h"
#include "core/room_types.h"
#include "server/eta_tracer.h"
#include "store/backend.h"

namespace anteroom::server {

struct RoomSample {
  int64_t t = 0;  // ms since the epoch
  int64_t active = 0;
  int64_t waiting = 0;
  int64_t capacity = 0;
  int64_t admitted_total = 0;
  int64_t dropped_total = 0;
  int64_t released_total = 0;
  bool paused = false;
  // The ETA's relative error over the traces that ended in the 5 minutes before t
  // (EtaErrorSummary): how many, and their median and 90th percentile (NaN: fewer than 5).
  int32_t eta_traces = 0;
  float eta_error_p50 = std::numeric_limits<float>::quiet_NaN();
  float eta_error_p90 = std::numeric_limits<float>::quiet_NaN();
};
static_assert(sizeof(RoomSample) == 72);

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
static_assert(sizeof(QueueSample) == 72);

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

// The samples of one room or queue: every one of the last 15 minutes (`fine`), and one a minute
// (the first at least a minute after the one before) for the hour (`minutes`).
template <typename T>
struct SampleSeries {
  SampleSeries(size_t fine_capacity, size_t minute_capacity)
      : fine(fine_capacity), minutes(minute_capacity) {}
  void Push(int64_t t, const T& value) {
    if (minutes.size() == 0 || t - minutes[minutes.size() - 1].t >= 60'000) minutes.Push(value);
    fine.Push(value);
  }
  // Oldest first: the one-minute samples older than every fine one, then the fine ones.
  std::vector<T> All() const {
    std::vector<T> out;
    int64_t fine_from = fine.size() > 0 ? fine[0].t : std::numeric_limits<int64_t>::max();
    size_t older = 0;
    while (older < minutes.size() && minutes[older].t < fine_from) ++older;
    out.reserve(older + fine.size());
    for (size_t i = 0; i < older; ++i) out.push_back(minutes[i]);
    for (size_t i = 0; i < fine.size(); ++i) out.push_back(fine[i]);
    return out;
  }
  SampleRing<T> fine;
  SampleRing<T> minutes;
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
  static constexpr int64_t kWindowMs = 15 * 60 * 1000;  // every sample
  static constexpr int64_t kHourMs = 60 * 60 * 1000;    // one a minute
  static constexpr int64_t kMinuteMs = 60 * 1000;

  explicit StatsHistory(int64_t interval_ms);

  int64_t interval_ms() const { return interval_ms_; }
  // Samples kept per room or queue at the interval: the window and one more, so they span all
  // of it; and one-minute samples: the hour and one more.
  size_t capacity() const { return capacity_; }
  static constexpr size_t minute_capacity() { return kHourMs / kMinuteMs + 1; }

  using EtaErrors = std::map<std::string, EtaErrorSummary, std::less<>>;
  // One sample of every room listed, taken at t, with its ETA errors if `eta` has them; rooms
  // not listed are gone and forgotten.
  void AddRooms(int64_t t, const std::vector<core::RoomInfo>& rooms,
                const EtaErrors* eta = nullptr);
  void AddQueues(int64_t t, const std::vector<std::pair<std::string, core::QueueStats>>& queues);

  // {"interval_ms", "minute_ms", "window_ms", "now_ms", "rooms": [{"room", "samples": [...]}],
  // "queues": [...], "rooms_total", "queues_total", "next": {"room_after", "queue_after"}}: one
  // page of names in order, samples oldest first (docs/api.md). The lock is held only to copy the
  // page's samples.
  boost::json::object ToJson(int64_t now_ms, const HistoryPage& page = {}) const;

 private:
  const int64_t interval_ms_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, SampleSeries<RoomSample>, std::less<>> rooms_;    // guarded by mu_
  std::map<std::string, SampleSeries<QueueSample>, std::less<>> queues_;  // guarded by mu_
};

// Samples the backend into a history every interval, on a timer of one io_context (the pool's
// main one). A slow backend delays the next sample instead of overlapping it. Declare it after
// the backend: it must stop before the backend goes.
class StatsSampler {
 public:
  // `eta`, when given, adds each room's ETA errors to its samples.
  StatsSampler(boost::asio::io_context& io, store::Backend& backend, const Clock& clock,
               StatsHistory& history, const EtaTracer* eta = nullptr);
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
