#include "server/eta_tracer.h"

#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/room_notice.h"

namespace anteroom::server {

EtaTracer::EtaTracer(const Clock& clock, EtaTracerOptions options)
    : clock_(clock), options_(options) {}

void EtaTracer::OnAnswer(std::string_view room, const core::SessionView& v) {
  if (v.status != core::SessionStatus::kWaiting || !v.eta_ms || *v.eta_ms < 0) return;
  int64_t now = clock_.NowMs();
  std::lock_guard lock(mu_);
  auto it = rooms_.find(room);
  if (it != rooms_.end()) {
    RoomTraces& r = it->second;
    if (now < r.next_start_ms || r.open.size() >= options_.max_open_per_room) return;
    for (const Trace& t : r.open) {
      if (t.session == v.session) return;  // already followed
    }
  } else {
    if (rooms_.size() >= options_.max_rooms) return;
    it = rooms_.emplace(std::string(room), RoomTraces{}).first;
  }
  RoomTraces& r = it->second;
  r.next_start_ms = now + options_.sample_every_ms;
  r.open.push_back(Trace{.session = v.session,
                         .start_ms = now,
                         .predicted_ms = *v.eta_ms,
                         .position = v.odds ? 0 : v.position});
  open_.fetch_add(1, std::memory_order_relaxed);
}

void EtaTracer::OnEvents(const std::vector<store::LifecycleEvent>& events) {
  if (events.empty()) return;
  std::lock_guard lock(mu_);
  for (const store::LifecycleEvent& e : events) OnEvent(e);
}

void EtaTracer::OnEvent(const store::LifecycleEvent& e) {
  if (e.room.empty()) return;  // a queue's
  auto kind = core::ParseNoticeKind(e.type);
  if (!kind) return;
  using enum core::NoticeKind;
  bool ends = *kind == kAdmitted;
  bool drops = *kind == kLeft || *kind == kDropped || *kind == kExpired || *kind == kRevoked ||
               *kind == kPassUsed;
  if (!ends && !drops && *kind != kDeleted) return;
  auto it = rooms_.find(e.room);
  if (it == rooms_.end()) return;
  RoomTraces& r = it->second;
  if (*kind == kDeleted) {  // a room made again under the name starts afresh
    open_.fetch_sub(r.open.size(), std::memory_order_relaxed);
    rooms_.erase(it);
    return;
  }
  auto trace = std::find_if(r.open.begin(), r.open.end(),
                            [&](const Trace& t) { return t.session == e.session; });
  // What happened before the trace began (the reader lags) is of an earlier stay in the room.
  if (trace == r.open.end() || e.at_ms < trace->start_ms) return;
  if (ends) {
    int64_t actual = e.at_ms - trace->start_ms;
    if (actual >= options_.min_actual_ms) {
      double error =
          std::abs(static_cast<double>(trace->predicted_ms - actual)) / static_cast<double>(actual);
      r.errors.push_back(Error{.at_ms = e.at_ms, .value = static_cast<float>(error)});
      while (r.errors.size() > options_.max_errors_per_room) r.errors.pop_front();
    }
  }
  r.open.erase(trace);
  open_.fetch_sub(1, std::memory_order_relaxed);
}

void EtaTracer::Sweep() {
  int64_t now = clock_.NowMs();
  std::lock_guard lock(mu_);
  for (auto it = rooms_.begin(); it != rooms_.end();) {
    RoomTraces& r = it->second;
    size_t before = r.open.size();
    std::erase_if(r.open, [&](const Trace& t) { return now - t.start_ms > options_.max_trace_ms; });
    open_.fetch_sub(before - r.open.size(), std::memory_order_relaxed);
    while (!r.errors.empty() && r.errors.front().at_ms <= now - options_.window_ms) {
      r.errors.pop_front();
    }
    // An idle room is forgotten only once its next trace is due anyway.
    if (r.open.empty() && r.errors.empty() && now >= r.next_start_ms) {
      it = rooms_.erase(it);
    } else {
      ++it;
    }
  }
}

EtaErrorSummary EtaTracer::SummaryOf(const RoomTraces& r, int64_t now) const {
  std::vector<float> values;
  values.reserve(r.errors.size());
  for (const Error& e : r.errors) {
    if (e.at_ms > now - options_.window_ms) values.push_back(e.value);
  }
  EtaErrorSummary out;
  out.count = values.size();
  if (values.size() < EtaErrorSummary::kMinCount) return out;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least q of the values at or below it.
  auto rank = [&](double q) {
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return static_cast<double>(values[std::clamp<size_t>(k, 1, values.size()) - 1]);
  };
  out.p50 = rank(0.5);
  out.p90 = rank(0.9);
  return out;
}

std::map<std::string, EtaErrorSummary, std::less<>> EtaTracer::Summaries() const {
  int64_t now = clock_.NowMs();
  std::map<std::string, EtaErrorSummary, std::less<>> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, r] : rooms_) {
    if (r.errors.empty()) continue;
    EtaErrorSummary s = SummaryOf(r, now);
    if (s.count > 0) out.emplace_hint(out.end(), name, s);
  }
  return out;
}

EtaErrorSummary EtaTracer::Summary(std::string_view room) const {
  int64_t now = clock_.NowMs();
  std::lock_guard lock(mu_);
  auto it = rooms_.find(room);
  return it == rooms_.end() ? EtaErrorSummary{} : SummaryOf(it->second, now);
}

size_t EtaTracer::open_traces() const { return open_.load(std::memory_order_relaxed); }

size_t EtaTracer::rooms() const {
  std::lock_guard lock(mu_);
  return rooms_.size();
}

// ---- the reader -----------------------------------------------------------------------------

EtaEventReader::EtaEventReader(store::Backend& backend, boost::asio::io_context& io,
                               EtaTracer& tracer, EtaEventReaderOptions options)
    : backend_(backend),
      io_(io),
      tracer_(tracer),
      options_(options),
      // Events come with every join: they are worth a read only while traces are open.
      follower_(
          backend, io, {.poll = options.poll}, [this] { Step(); },
          [this] { return tracer_.open_traces() > 0; }) {}

EtaEventReader::~EtaEventReader() = default;

void EtaEventReader::Start() { follower_.Start(); }

void EtaEventReader::Stop() { follower_.Stop(); }

void EtaEventReader::Step() {
  tracer_.Sweep();
  // Nothing to resolve: only the position moves (nullopt reads from the newest on). A trace
  // begun while this read is under way may miss an admission made meanwhile: it is dropped
  // later, with its session's slot (the header).
  bool idle = tracer_.open_traces() == 0;
  std::optional<store::EventId> after = idle ? std::nullopt : after_;
  backend_.ReadEvents(after, idle ? 1 : options_.batch, [this](OpResult<store::EventRead> r) {
    boost::asio::post(io_, [this, r = std::move(r)] {
      if (!r.ok()) {
        spdlog::debug("eta tracer: reading events failed: {}", r.message());
        return follower_.Done(false);
      }
      tracer_.OnEvents(r->events);
      after_ = r->last;
      follower_.Done(r->events.size() >= options_.batch);
    });
  });
}

}  // namespace anteroom::server
