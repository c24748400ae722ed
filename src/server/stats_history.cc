#include "server/stats_history.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/array.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <set>

namespace anteroom::server {

namespace json = boost::json;

namespace {

// Keeps the entries whose names are in `live`, appending a sample to each; new names start a
// series, names gone are forgotten.
template <typename Sample, typename Item, typename NameOf, typename SampleOf>
void Update(std::map<std::string, SampleSeries<Sample>, std::less<>>& series, size_t capacity,
            int64_t t, const std::vector<Item>& live, NameOf name_of, SampleOf sample_of) {
  std::set<std::string_view> names;
  for (const Item& item : live) names.insert(name_of(item));
  std::erase_if(series, [&](const auto& entry) { return !names.contains(entry.first); });
  for (const Item& item : live) {
    auto it = series.find(name_of(item));
    if (it == series.end()) {
      it = series
               .emplace(std::string(name_of(item)),
                        SampleSeries<Sample>(capacity, StatsHistory::minute_capacity()))
               .first;
    }
    it->second.Push(t, sample_of(item));
  }
}

json::value Fraction(float v) {
  if (std::isnan(v)) return nullptr;
  return std::round(static_cast<double>(v) * 10'000) / 10'000;  // 4 decimals: 0.01 %
}

json::object RoomSampleJson(const RoomSample& s) {
  return json::object{{"t", s.t},
                      {"active", s.active},
                      {"waiting", s.waiting},
                      {"capacity", s.capacity},
                      {"paused", s.paused},
                      {"admitted_total", s.admitted_total},
                      {"dropped_total", s.dropped_total},
                      {"released_total", s.released_total},
                      {"eta_traces", s.eta_traces},
                      {"eta_error_p50", Fraction(s.eta_error_p50)},
                      {"eta_error_p90", Fraction(s.eta_error_p90)}};
}

json::object QueueSampleJson(const QueueSample& s) {
  return json::object{{"t", s.t},
                      {"ready", s.ready},
                      {"inflight", s.inflight},
                      {"delayed", s.delayed},
                      {"dead", s.dead},
                      {"pushed_total", s.pushed_total},
                      {"acked_total", s.acked_total},
                      {"nacked_total", s.nacked_total},
                      {"expired_total", s.expired_total}};
}

// One page of rows copied out of the rings (under the history's lock), to be written after.
template <typename Sample>
struct PageRows {
  std::vector<std::pair<std::string, std::vector<Sample>>> rows;
  size_t total = 0;
  bool more = false;
};

template <typename Sample>
PageRows<Sample> CopyPage(const std::map<std::string, SampleSeries<Sample>, std::less<>>& rings,
                          const std::string& after, size_t limit) {
  PageRows<Sample> page;
  page.total = rings.size();
  if (limit == 0) return page;  // the kind was not asked for
  auto it = after.empty() ? rings.begin() : rings.upper_bound(after);
  for (; it != rings.end() && page.rows.size() < limit; ++it) {
    page.rows.emplace_back(it->first, it->second.All());
  }
  page.more = it != rings.end();
  return page;
}

template <typename Sample, typename ToJson>
json::array RowsJson(const PageRows<Sample>& page, std::string_view key, ToJson to_json) {
  json::array out;
  out.reserve(page.rows.size());
  for (const auto& [name, samples] : page.rows) {
    json::array list;
    list.reserve(samples.size());
    for (const Sample& s : samples) list.push_back(to_json(s));
    out.push_back(json::object{{key, name}, {"samples", std::move(list)}});
  }
  return out;
}

template <typename Sample>
json::value NextAfter(const PageRows<Sample>& page, const std::string& after) {
  if (!page.more) return nullptr;
  return json::string(page.rows.empty() ? after : page.rows.back().first);
}

}  // namespace

StatsHistory::StatsHistory(int64_t interval_ms)
    : interval_ms_(std::max<int64_t>(interval_ms, 1)),
      capacity_(static_cast<size_t>(kWindowMs / interval_ms_) + 1) {}

void StatsHistory::AddRooms(int64_t t, const std::vector<core::RoomInfo>& rooms,
                            const EtaErrors* eta) {
  std::lock_guard lock(mu_);
  Update(
      rooms_, capacity_, t, rooms,
      [](const core::RoomInfo& r) -> std::string_view { return r.room; },
      [t, eta](const core::RoomInfo& r) {
        RoomSample s{.t = t,
                     .active = r.active,
                     .waiting = r.waiting,
                     .capacity = r.config.capacity,
                     .admitted_total = r.counters.admitted_total,
                     .dropped_total = r.counters.dropped_total,
                     .released_total = r.counters.released_total,
                     .paused = r.config.paused};
        if (eta != nullptr) {
          if (auto it = eta->find(r.room); it != eta->end()) {
            s.eta_traces = static_cast<int32_t>(std::min<size_t>(it->second.count, INT32_MAX));
            if (it->second.p50) s.eta_error_p50 = static_cast<float>(*it->second.p50);
            if (it->second.p90) s.eta_error_p90 = static_cast<float>(*it->second.p90);
          }
        }
        return s;
      });
}

void StatsHistory::AddQueues(int64_t t,
                             const std::vector<std::pair<std::string, core::QueueStats>>& queues) {
  using Item = std::pair<std::string, core::QueueStats>;
  std::lock_guard lock(mu_);
  Update(
      queues_, capacity_, t, queues, [](const Item& q) -> std::string_view { return q.first; },
      [t](const Item& q) {
        const core::QueueStats& s = q.second;
        return QueueSample{.t = t,
                           .ready = s.ready,
                           .inflight = s.inflight,
                           .delayed = s.delayed,
                           .dead = s.dead,
                           .pushed_total = s.pushed,
                           .acked_total = s.acked,
                           .nacked_total = s.nacked,
                           .expired_total = s.expired};
      });
}

json::object StatsHistory::ToJson(int64_t now_ms, const HistoryPage& page) const {
  size_t limit = std::clamp<size_t>(page.limit, 1, HistoryPage::kMaxLimit);
  PageRows<RoomSample> rooms;
  PageRows<QueueSample> queues;
  {
    std::lock_guard lock(mu_);
    rooms = CopyPage(rooms_, page.room_after, page.rooms ? limit : 0);
    queues = CopyPage(queues_, page.queue_after, page.queues ? limit : 0);
  }
  return json::object{{"interval_ms", interval_ms_},
                      {"minute_ms", kMinuteMs},
                      {"window_ms", kHourMs},
                      {"now_ms", now_ms},
                      {"rooms", RowsJson(rooms, "room", RoomSampleJson)},
                      {"queues", RowsJson(queues, "queue", QueueSampleJson)},
                      {"rooms_total", rooms.total},
                      {"queues_total", queues.total},
                      {"next", json::object{{"room_after", NextAfter(rooms, page.room_after)},
                                            {"queue_after", NextAfter(queues, page.queue_after)}}}};
}

// ---- the sampler ----------------------------------------------------------------------------

// Shared with the backend's completions, which hold it weakly: a completion that arrives after
// the sampler is gone does nothing.
struct StatsSampler::State : std::enable_shared_from_this<StatsSampler::State> {
  State(boost::asio::io_context& io, store::Backend& backend, const Clock& clock,
        StatsHistory& history, const EtaTracer* eta)
      : io(io), backend(backend), clock(clock), history(history), eta(eta), timer(io) {}

  // On the io_context's thread.
  void Sample() {
    if (stopped.load()) return;
    std::weak_ptr<State> weak = weak_from_this();
    backend.ListRooms([weak](OpResult<std::vector<core::RoomInfo>> rooms) {
      auto self = weak.lock();
      if (!self || self->stopped.load()) return;
      if (rooms.ok()) {
        StatsHistory::EtaErrors errors;
        if (self->eta != nullptr) errors = self->eta->Summaries();
        self->history.AddRooms(self->clock.NowMs(), *rooms, &errors);
        if (self->on_rooms) self->on_rooms(*rooms);
      } else {
        spdlog::debug("stats history: listing rooms failed: {}", rooms.message());
      }
      self->backend.ListQueues(
          [weak](OpResult<std::vector<std::pair<std::string, core::QueueStats>>> queues) {
            auto self = weak.lock();
            if (!self || self->stopped.load()) return;
            if (queues.ok()) {
              self->history.AddQueues(self->clock.NowMs(), *queues);
            } else {
              spdlog::debug("stats history: listing queues failed: {}", queues.message());
            }
            // Completions may run on any thread; the timer lives on the io_context's.
            boost::asio::post(self->io, [weak] {
              if (auto self = weak.lock()) self->ScheduleNext();
            });
          });
    });
  }

  // On the io_context's thread. Keeps to the interval's beat; after a sample slower than the
  // interval, the next comes one interval after now.
  void ScheduleNext() {
    if (stopped.load()) return;
    auto now = std::chrono::steady_clock::now();
    next += std::chrono::milliseconds(history.interval_ms());
    if (next <= now) next = now + std::chrono::milliseconds(history.interval_ms());
    timer.expires_at(next);
    std::weak_ptr<State> weak = weak_from_this();
    timer.async_wait([weak](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->Sample();
    });
  }

  boost::asio::io_context& io;
  store::Backend& backend;
  const Clock& clock;
  StatsHistory& history;
  const EtaTracer* eta;
  boost::asio::steady_timer timer;
  std::chrono::steady_clock::time_point next;
  std::atomic<bool> stopped{false};
  std::function<void(const std::vector<core::RoomInfo>&)> on_rooms;
};

StatsSampler::StatsSampler(boost::asio::io_context& io, store::Backend& backend, const Clock& clock,
                           StatsHistory& history, const EtaTracer* eta)
    : state_(std::make_shared<State>(io, backend, clock, history, eta)) {}

StatsSampler::~StatsSampler() { Stop(); }

void StatsSampler::OnRooms(std::function<void(const std::vector<core::RoomInfo>&)> fn) {
  state_->on_rooms = std::move(fn);
}

void StatsSampler::Start() {
  state_->next = std::chrono::steady_clock::now();
  boost::asio::post(state_->io, [weak = std::weak_ptr<State>(state_)] {
    if (auto self = weak.lock()) self->Sample();
  });
}

void StatsSampler::Stop() {
  state_->stopped.store(true);
  state_->timer.cancel();
}

}  // namespace anteroom::server
