#include "server/live_hub.h"

#include <boost/asio/post.hpp>

#include <algorithm>

#include "server/session_json.h"

namespace anteroom::server {

namespace net = boost::asio;
using core::SessionStatus;
using core::SessionView;

namespace {
constexpr int64_t kMaxKeepaliveMs = 10'000;
constexpr int64_t kHolderCheckMs = 1'000;
constexpr int64_t kCountsEveryMs = 1'000;  // a change of the counts alone, per client
}  // namespace

LiveHub::LiveHub(store::Backend& backend, const core::TokenSigner& signer, const Clock& clock,
                 net::io_context& home, LiveHubOptions options)
    : backend_(backend),
      signer_(signer),
      clock_(clock),
      home_(home),
      options_(options),
      timer_(home) {}

LiveHub::~LiveHub() { *alive_ = false; }

template <typename Fn>
void LiveHub::Home(Fn&& fn) {
  net::post(home_, [alive = std::weak_ptr<bool>(alive_), fn = std::forward<Fn>(fn)]() mutable {
    if (auto a = alive.lock(); a && *a) fn();
  });
}

void LiveHub::Start() {
  Home([this] { Arm(); });
}

void LiveHub::Stop() {
  Home([this] {
    stopped_ = true;
    timer_.cancel();
  });
}

void LiveHub::Arm() {
  if (stopped_) return;
  // A few polls per tick, so that a round due after a long one starts without waiting for a
  // whole tick; each room's line is still read once per tick when nothing is being shown. The
  // timer is set for that read (or a round known to be due) when it comes before the next poll.
  int64_t delay = std::max<int64_t>(10, options_.tick_ms / 5);
  int64_t now = clock_.NowMs();
  // (While deliveries hold the tick back, their completion runs it: no early wake-ups then.)
  if (flushes_->load(std::memory_order_acquire) <= 1) {
    for (const auto& [room, rw] : rooms_) {
      if (rw.reading || rw.in_round()) continue;
      int64_t due = rw.line_read_ms + options_.tick_ms;
      if (rw.dirty) due = std::min(due, rw.round_started_ms + options_.tick_ms);
      delay = std::min(delay, std::max<int64_t>(1, due - now));
    }
  }
  timer_.expires_after(std::chrono::milliseconds(delay));
  timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
    if (ec || alive.expired() || stopped_) return;
    Tick();
    Arm();
  });
}

std::string LiveHub::StatusMessage(std::string_view room, const SessionView& view) const {
  fmt::memory_buffer out;
  AppendSessionJson(out, view, AdmissionToken(room, view, signer_, clock_), "status");
  return std::string(out.data(), out.size());
}

// ---- streams coming and going ---------------------------------------------------------------

void LiveHub::Attach(std::string room, SessionView first, std::shared_ptr<LiveStream> stream) {
  streams_.fetch_add(1, std::memory_order_relaxed);
  stream->Deliver(StatusMessage(room, first));
  stream->OnClosed([this, alive = std::weak_ptr<bool>(alive_), room, session = first.session,
                    raw = stream.get()] {
    if (alive.expired()) return;
    streams_.fetch_sub(1, std::memory_order_relaxed);
    Home([this, room, session, raw] { Detach(room, session, raw); });
  });
  Home([this, room = std::move(room), first = std::move(first), stream = std::move(stream)] {
    RoomWatch& rw = rooms_[room];
    Watch& w = rw.sessions[first.session];
    w.streams.push_back(stream);
    Outbox out;
    if (rw.silence_bound_ms) {
      out.For(&stream->executor().context())
          .push_back(
              {stream, std::string(), false, std::chrono::milliseconds(rw.silence_bound_ms)});
    }
    if (w.streams.size() == 1) {
      w.last = first;
      // Every field the first message showed: one left at its default (the phase, the method)
      // would differ from the next round's and send the same status again.
      w.shown = {first.status,   first.position, first.waiting, first.active,
                 first.capacity, first.eta_ms,   first.phase,   first.queueing_method};
      if (rw.have_counts) {  // the event's times, as the rounds compare them
        w.shown.event_starts_at = rw.counts.event_starts_at;
        w.shown.event_ends_at = rw.counts.event_ends_at;
      }
      w.shown_ms = clock_.NowMs();
    } else {
      // Another stream of a session that has some (a reload, a second tab): it is brought to
      // what the others were shown, and they are sent nothing, so an attach costs the same
      // however many the session has. Past max_streams_per_session the oldest is closed: a
      // session's streams are bounded, whoever opens them.
      out.For(&stream->executor().context())
          .push_back({stream, StatusMessage(room, ViewFromLine(rw, w))});
      if (w.streams.size() > options_.max_streams_per_session) {
        std::shared_ptr<LiveStream> oldest = std::move(w.streams.front());
        w.streams.erase(w.streams.begin());
        out.For(&oldest->executor().context()).push_back({oldest, std::string(), /*finish=*/true});
      }
    }
    Flush(out);
  });
}

void LiveHub::Detach(const std::string& room, const std::string& session, LiveStream* stream) {
  auto rit = rooms_.find(room);
  if (rit == rooms_.end()) return;
  RoomWatch& rw = rit->second;
  auto wit = rw.sessions.find(session);
  if (wit == rw.sessions.end()) return;  // ended already (gone)
  auto& streams = wit->second.streams;
  std::erase_if(streams, [stream](const auto& s) { return s.get() == stream; });
  if (!streams.empty()) return;
  rw.sessions.erase(wit);
  if (rw.sessions.empty() && !rw.reading && rw.presenting == 0) rooms_.erase(rit);
  // The last stream closed: a check-in now starts a waiting session's drop-out clock at this
  // moment; a slot holder leaves without final, so its grace starts now.
  backend_.Present(room, {session},
                   [this, alive = std::weak_ptr<bool>(alive_), room,
                    session](OpResult<std::vector<SessionView>> r) {
                     if (alive.expired() || !r.ok() || r->empty()) return;
                     SessionStatus st = r->front().status;
                     if (st == SessionStatus::kActive || st == SessionStatus::kGrace) {
                       backend_.Leave(room, session, /*final=*/false, [](OpResult<SessionView>) {});
                     }
                   });
}

LiveHub::NewSessionGuard::~NewSessionGuard() {
  if (delivered_.load(std::memory_order_acquire)) return;
  auto alive = alive_.lock();
  if (!alive || !*alive) return;
  hub_.backend_.Leave(room_, session_, /*final=*/true, [](OpResult<SessionView>) {});
}

// ---- the tick ------------------------------------------------------------------------------

void LiveHub::Tick() {
  // Back-pressure: while earlier batches are still being written, a new sweep would only queue
  // older news behind them (and grow the queues without bound when the writes cannot keep up).
  // One flush may still be in flight, so that the threads write it while the next is made; the
  // tick runs as soon as no more is, on the line as it is then: changes are coalesced.
  if (flushes_->load(std::memory_order_acquire) > 1) {
    tick_deferred_ = true;
    return;
  }
  tick_deferred_ = false;
  int64_t now = clock_.NowMs();
  for (auto it = rooms_.begin(); it != rooms_.end();) {
    RoomWatch& rw = it->second;
    if (rw.sessions.empty() && !rw.reading && rw.presenting == 0) {
      it = rooms_.erase(it);
      continue;
    }
    if (rw.reading) {
      ++it;
      continue;
    }
    bool may_start = now - rw.round_started_ms >= options_.tick_ms;
    if (rw.in_round() && now - rw.line_read_ms < std::min(options_.reread_ms, options_.tick_ms)) {
      Outbox out;  // the round goes on with the line just read
      Advance(it->first, rw, out);
      Flush(out);
    } else if (!rw.in_round() && now - rw.line_read_ms < options_.tick_ms &&
               !(rw.dirty && may_start)) {
      // Nothing to show yet: the line is read once per tick.
    } else {
      rw.reading = true;
      backend_.ReadLine(it->first, rw.version, [this, room = it->first](auto r) {
        Home([this, room, r = std::move(r)]() mutable { OnLine(room, std::move(r)); });
      });
    }
    ++it;
  }
}

namespace {
// How long a connected session may go unseen before the room lets it go.
int64_t PresenceLimitMs(const core::LineView& c) {
  int64_t limit = c.checkin_timeout_ms;
  if (c.idle_timeout_ms) limit = std::min(limit, *c.idle_timeout_ms);
  return limit;
}
}  // namespace

int64_t LiveHub::KeepaliveEveryMs(const core::LineView& c) const {
  return std::clamp<int64_t>(PresenceLimitMs(c) / 3, options_.tick_ms, kMaxKeepaliveMs);
}

void LiveHub::BoundStreams(RoomWatch& rw, Outbox& out) {
  int64_t bound = std::max<int64_t>(PresenceLimitMs(rw.counts), 1);
  if (bound == rw.silence_bound_ms) return;
  rw.silence_bound_ms = bound;
  for (auto& [id, w] : rw.sessions) {
    for (const auto& stream : w.streams) {
      out.For(&stream->executor().context())
          .push_back({stream, std::string(), false, std::chrono::milliseconds(bound)});
    }
  }
}

void LiveHub::OnLine(const std::string& room, OpResult<core::LineView> result) {
  auto rit = rooms_.find(room);
  if (rit == rooms_.end()) return;
  RoomWatch& rw = rit->second;
  rw.reading = false;
  Outbox out;
  if (!result.ok()) {
    if (result.status() == OpStatus::kUnknownRoom) EndRoom(room, out);
    Flush(out);
    return;  // anything else (a lost store) is tried again next tick
  }
  core::LineView& v = *result;
  const core::LineView& c = rw.counts;
  bool counts_changed =
      !rw.have_counts || v.active != c.active || v.waiting != c.waiting ||
      v.capacity != c.capacity || v.flow != c.flow || v.admit_per_minute != c.admit_per_minute ||
      v.paused != c.paused || v.phase != c.phase || v.queueing_method != c.queueing_method ||
      v.event_starts_at != c.event_starts_at || v.event_ends_at != c.event_ends_at;
  if (v.changed) {
    // One ordered sweep: each connected session's position is its place in this walk.
    rw.version = v.version;
    uint64_t walk = ++rw.walk;
    for (size_t i = 0; i < v.line.size(); ++i) {
      auto it = rw.sessions.find(v.line[i]);
      if (it == rw.sessions.end()) continue;
      Watch& w = it->second;
      w.last.status = SessionStatus::kWaiting;
      w.last.position = static_cast<int64_t>(i) + 1;
      w.walk = walk;
    }
    // Out of the line since the last walk: admitted or dropped. Present tells which, at once.
    for (auto& [id, w] : rw.sessions) {
      if (w.walk != walk && w.last.status == SessionStatus::kWaiting) CheckInNow(rw, w);
    }
    rw.holder_check_due = true;
  }
  // Slot holders may have left or been evicted through the API: after a change they are asked
  // too, at most once a second (there are at most `capacity` of them).
  if (int64_t now = clock_.NowMs(); rw.holder_check_due && now >= rw.next_holder_check_ms) {
    rw.holder_check_due = false;
    rw.next_holder_check_ms = now + kHolderCheckMs;
    for (auto& [id, w] : rw.sessions) {
      if (w.last.status != SessionStatus::kWaiting) CheckInNow(rw, w);
    }
  }
  rw.counts.version = v.version;
  rw.counts.active = v.active;
  rw.counts.waiting = v.waiting;
  rw.counts.capacity = v.capacity;
  rw.counts.flow = v.flow;
  rw.counts.admit_per_minute = v.admit_per_minute;
  rw.counts.paused = v.paused;
  rw.counts.checkin_timeout_ms = v.checkin_timeout_ms;
  rw.counts.idle_timeout_ms = v.idle_timeout_ms;
  rw.counts.phase = v.phase;
  rw.counts.queueing_method = v.queueing_method;
  rw.counts.event_starts_at = v.event_starts_at;
  rw.counts.event_ends_at = v.event_ends_at;
  rw.have_counts = true;
  BoundStreams(rw, out);
  int64_t now = clock_.NowMs();
  rw.line_read_ms = now;
  if (v.changed || counts_changed) rw.dirty = true;
  Advance(room, rw, out);
  bool keepalive = now >= rw.next_keepalive_ms;
  if (keepalive) rw.next_keepalive_ms = now + KeepaliveEveryMs(rw.counts);
  CheckIn(room, rw, keepalive);
  Flush(out);
}

void LiveHub::CheckInNow(RoomWatch& rw, Watch& w) {
  if (!w.check_in_now) ++rw.check_ins_due;
  w.check_in_now = true;
}

void LiveHub::CheckIn(const std::string& room, RoomWatch& rw, bool everyone) {
  // Runs after every read of the line: without anyone to ask, it must not cost a pass over
  // every connected session.
  if (!everyone && rw.check_ins_due == 0) return;
  rw.check_ins_due = 0;
  std::vector<std::string> batch;
  auto send = [&] {
    ++rw.presenting;
    backend_.Present(room, std::move(batch), [this, room](auto r) {
      Home([this, room, r = std::move(r)]() mutable { OnPresent(room, std::move(r)); });
    });
    batch.clear();
  };
  for (auto& [id, w] : rw.sessions) {
    if (!everyone && !w.check_in_now) continue;
    w.check_in_now = false;
    batch.push_back(id);
    if (batch.size() >= options_.present_batch) send();
  }
  if (!batch.empty()) send();
}

void LiveHub::OnPresent(const std::string& room, OpResult<std::vector<SessionView>> result) {
  auto rit = rooms_.find(room);
  if (rit == rooms_.end()) return;
  RoomWatch& rw = rit->second;
  --rw.presenting;
  Outbox out;
  if (!result.ok()) {
    if (result.status() == OpStatus::kUnknownRoom) EndRoom(room, out);
    Flush(out);
    return;
  }
  std::vector<std::string> gone;
  for (SessionView& view : *result) {
    auto it = rw.sessions.find(view.session);
    if (it == rw.sessions.end()) continue;
    Watch& w = it->second;
    // While waiting, the line walk owns the position; this answer may be older than it.
    if (view.status != SessionStatus::kWaiting || w.last.status != SessionStatus::kWaiting) {
      w.last = std::move(view);
    }
    Show(room, rw, w, out, clock_.NowMs());
    if (w.last.status == SessionStatus::kGone) {
      EndWatch(w, out);
      gone.push_back(it->first);
    }
  }
  for (const std::string& id : gone) rw.sessions.erase(id);
  Flush(out);
}

// ---- what clients see ----------------------------------------------------------------------

namespace {
bool Moving(const core::LineView& c) {
  return !c.paused && c.queueing_method != core::QueueingMethod::kQueueAll;
}
bool Drawn(const core::LineView& c) { return c.queueing_method == core::QueueingMethod::kRandom; }
std::optional<int64_t> MsUntil(const std::optional<int64_t>& at, int64_t now) {
  if (!at || *at <= now) return std::nullopt;
  return *at - now;
}
// The wait shown to a waiting session at `position` (in the random method, which has no
// places, the median of its odds), as the room's own view says it.
std::optional<int64_t> ShownEta(const core::LineView& c, int64_t position) {
  if (!Moving(c)) return std::nullopt;
  if (!Drawn(c)) return core::EtaMs(position, c.flow, c.admit_per_minute);
  auto odds = core::RandomOdds(c.waiting, c.flow, c.admit_per_minute, true);
  return odds ? odds->p50_ms : std::nullopt;
}
}  // namespace

SessionView LiveHub::ViewFromLine(const RoomWatch& rw, const Watch& w) const {
  SessionView v = w.last;
  if (!rw.have_counts || v.status == SessionStatus::kGone) return v;
  const core::LineView& c = rw.counts;
  v.waiting = c.waiting;
  v.active = c.active;
  v.capacity = c.capacity;
  v.phase = c.phase;
  v.queueing_method = c.queueing_method;
  int64_t now = clock_.NowMs();
  v.starts_in_ms = MsUntil(c.event_starts_at, now);
  v.ends_in_ms = MsUntil(c.event_ends_at, now);
  if (v.status == SessionStatus::kPrequeue && !v.starts_in_ms) v.starts_in_ms = 0;  // drawing
  v.odds.reset();
  if (v.status == SessionStatus::kWaiting) {
    if (Drawn(c)) {
      v.position = 0;  // the random method has no places, only odds
      v.odds = core::RandomOdds(c.waiting, c.flow, c.admit_per_minute, Moving(c));
    }
    v.eta_ms = ShownEta(c, v.position);
  }
  v.refresh_after_ms = core::RefreshAfterMs(v.status, c.checkin_timeout_ms, c.idle_timeout_ms,
                                            v.starts_in_ms, v.eta_ms);
  return v;
}

// What ViewFromLine would show, without copying the view (this runs for every client in a round).
LiveHub::Shown LiveHub::ShownFromLine(const RoomWatch& rw, const Watch& w) const {
  const SessionView& v = w.last;
  bool waiting = v.status == SessionStatus::kWaiting;
  Shown s{v.status, waiting ? v.position : 0, v.waiting, v.active, v.capacity, v.eta_ms,
          v.phase,  v.queueing_method};
  if (!rw.have_counts || v.status == SessionStatus::kGone) return s;
  const core::LineView& c = rw.counts;
  s.waiting = c.waiting;
  s.active = c.active;
  s.capacity = c.capacity;
  s.phase = c.phase;
  s.queueing_method = c.queueing_method;
  s.event_starts_at = c.event_starts_at;
  s.event_ends_at = c.event_ends_at;
  if (waiting) {
    if (Drawn(c)) s.position = 0;
    s.eta_ms = ShownEta(c, v.position);
  }
  return s;
}

void LiveHub::Advance(const std::string& room, RoomWatch& rw, Outbox& out) {
  if (!rw.in_round()) {
    rw.round.clear();
    rw.round_at = 0;
    int64_t now = clock_.NowMs();
    // A round starts at most once per tick: at most one message per client per tick.
    if (!rw.dirty || now - rw.round_started_ms < options_.tick_ms) return;
    rw.dirty = false;
    rw.round_started_ms = now;
    rw.round.reserve(rw.sessions.size());
    for (const auto& entry : rw.sessions) rw.round.push_back(entry.first);
  }
  size_t queued = 0;
  int64_t now = clock_.NowMs();
  while (rw.in_round() && queued < options_.chunk) {
    auto it = rw.sessions.find(rw.round[rw.round_at++]);
    if (it == rw.sessions.end() || it->second.check_in_now) continue;  // ended, or asked now
    if (Show(room, rw, it->second, out, now)) ++queued;
  }
  if (rw.in_round() || rw.dirty) GoOn();
}

// The next chunk is made while this one is written (one flush may be in flight), or as soon as
// it is.
void LiveHub::GoOn() {
  tick_deferred_ = true;
  if (go_on_posted_ || flushes_->load(std::memory_order_acquire) > 1) return;
  go_on_posted_ = true;
  Home([this] {
    go_on_posted_ = false;
    if (tick_deferred_ && !stopped_) Tick();
  });
}

bool LiveHub::Show(const std::string& room, RoomWatch& rw, Watch& w, Outbox& out, int64_t now) {
  Shown shown = ShownFromLine(rw, w);
  if (shown == w.shown) return false;
  bool counts_only = shown.status == w.shown.status && shown.position == w.shown.position;
  if (counts_only && now - w.shown_ms < kCountsEveryMs) {
    rw.dirty = true;  // a later round sends it
    return false;
  }
  w.shown = shown;
  w.shown_ms = now;
  std::string message = StatusMessage(room, ViewFromLine(rw, w));
  for (size_t i = 0; i < w.streams.size(); ++i) {
    const auto& stream = w.streams[i];
    bool last = i + 1 == w.streams.size();  // usually the only one: it takes the message
    out.For(&stream->executor().context()).push_back({stream, last ? std::move(message) : message});
  }
  return true;
}

void LiveHub::EndWatch(Watch& w, Outbox& out) {
  for (const auto& stream : w.streams) {
    out.For(&stream->executor().context()).push_back({stream, std::string(), /*finish=*/true});
  }
}

// The room is gone: every client is told so, and its streams close.
void LiveHub::EndRoom(const std::string& room, Outbox& out) {
  auto rit = rooms_.find(room);
  if (rit == rooms_.end()) return;
  for (auto& [id, w] : rit->second.sessions) {
    SessionView gone;
    gone.session = id;
    w.last = gone;
    Show(room, rit->second, w, out, clock_.NowMs());
    EndWatch(w, out);
  }
  rit->second.sessions.clear();
}

void LiveHub::Flush(Outbox& out) {
  if (out.empty()) return;
  flushes_->fetch_add(1, std::memory_order_relaxed);
  // One flush is written when the batch of each of its threads is.
  auto batches_left = std::make_shared<std::atomic<size_t>>(out.by_thread.size());
  for (auto& [context, deliveries] : out.by_thread) {
    net::post(*context, [this, alive = std::weak_ptr<bool>(alive_), flushes = flushes_,
                         batches_left, deliveries = std::move(deliveries)]() mutable {
      for (Delivery& d : deliveries) {
        if (d.silence_bound.count() > 0) d.stream->BoundSilence(d.silence_bound);
        if (!d.message.empty()) d.stream->Deliver(std::move(d.message));
        if (d.finish) d.stream->Finish();
      }
      if (batches_left->fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      flushes->fetch_sub(1, std::memory_order_acq_rel);
      if (alive.expired()) return;
      Home([this] {
        if (tick_deferred_ && !stopped_) Tick();
      });
    });
  }
  out.by_thread.clear();
}

}  // namespace anteroom::server
