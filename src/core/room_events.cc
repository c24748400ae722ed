// Launch day in core::Room: queueing methods, scheduled events, the pre-queue and its draw
// (the rules are stated in room.h; what a schedule may hold, in schedule.h).
#include <algorithm>
#include <cmath>

#include "common/wire_errors.h"
#include "core/room.h"
#include "core/schedule.h"

namespace anteroom::core {

namespace {
constexpr int64_t kMinRefreshMs = 250;
constexpr int64_t kMaxRefreshMs = 30'000;
constexpr int64_t kWaitingRefreshMaxMs = 10'000;
constexpr int64_t kDrawingRefreshMs = 500;

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::clamp(v, lo, hi); }
}  // namespace

// ---- the effective settings ----------------------------------------------------------------

const RoomEvent* Room::OpenEvent() const {
  return open_ < 0 ? nullptr : &events_[static_cast<size_t>(open_)];
}

std::optional<std::string> Room::open_event() const {
  const RoomEvent* e = OpenEvent();
  return e ? std::optional<std::string>(e->id) : std::nullopt;
}

RoomConfig Room::EffectiveConfig() const {
  RoomConfig c = own_;
  if (const RoomEvent* e = OpenEvent(); e && e->stage == EventStage::kRunning) {
    const EventOverrides& o = e->spec.overrides;
    if (o.capacity) c.capacity = *o.capacity;
    if (o.admit_per_minute) c.admit_per_minute = *o.admit_per_minute;
    if (o.grace_ms) c.grace_ms = *o.grace_ms;
    if (o.checkin_timeout_ms) c.checkin_timeout_ms = *o.checkin_timeout_ms;
    // The brake is the operator's: an event's method never lets go of it.
    if (o.queueing_method && own_.queueing_method != QueueingMethod::kQueueAll) {
      c.queueing_method = *o.queueing_method;
    }
  }
  return c;
}

// An event's change of presence timeouts counts everyone present as seen now: nobody loses
// a place through an event's start or end (a shorter check-in timeout runs from now), and no
// presence deadline lands before the stage change that moved it, so a replay, which applies
// presence expiries from the log in time order, meets them in the same order as the room did.
void Room::ApplyEffective(int64_t now, bool fresh_presence) {
  RoomConfig before = std::move(config_);
  config_ = EffectiveConfig();
  ++version_;
  if (before.queueing_method != config_.queueing_method) {
    Note(NoticeKind::kMethodChanged, now, kNoIndex, ToString(config_.queueing_method));
  }
  if (before.grace_ms != config_.grace_ms ||
      before.checkin_timeout_ms != config_.checkin_timeout_ms ||
      before.idle_timeout_ms != config_.idle_timeout_ms) {
    if (fresh_presence) {
      index_.ForEach([this](Index i) { slab_[i].last_seen = std::max(slab_[i].last_seen, now_); });
    }
    RekeyAll();
  }
  Fill(now);
}

// ---- the schedule --------------------------------------------------------------------------

bool Room::PrequeueOpen() const {
  if (draw_) return true;  // arrivals during a draw follow the drawn
  const RoomEvent* e = OpenEvent();
  return e != nullptr && e->stage == EventStage::kPrequeue;
}

void Room::ComputeNextBoundary() {
  next_boundary_ = INT64_MAX;
  open_ = -1;
  upcoming_ = -1;
  for (size_t k = 0; k < events_.size(); ++k) {
    const RoomEvent& e = events_[k];
    if (e.spec.suspended) continue;  // a suspended event stays where it is
    int64_t t = INT64_MAX;
    switch (e.stage) {
      case EventStage::kScheduled:
        t = e.spec.OpensAt();
        if (upcoming_ < 0) upcoming_ = static_cast<int>(k);
        break;
      case EventStage::kPrequeue:
        t = e.spec.starts_at;
        open_ = static_cast<int>(k);
        break;
      case EventStage::kRunning:
        t = e.spec.ends_at;
        open_ = static_cast<int>(k);
        break;
      case EventStage::kEnded:
        break;
    }
    next_boundary_ = std::min(next_boundary_, t);
  }
}

// Stage changes wait while a draw is on (the backend publishes it within seconds): a draw's
// seed is given between two Advances, so one Advance never starts two draws.
uint64_t Room::BoundaryKey() const {
  if (draw_ || next_boundary_ == INT64_MAX) return kNever;
  return Key(next_boundary_, kKindOther);
}

void Room::ProcessBoundary(int64_t when) {
  for (RoomEvent& e : events_) {
    if (e.spec.suspended) continue;
    switch (e.stage) {
      case EventStage::kScheduled:
        if (e.spec.OpensAt() != next_boundary_) continue;
        if (e.spec.prequeue_at) {
          e.stage = EventStage::kPrequeue;
          ComputeNextBoundary();
          OpenPrequeue(e, when);
        } else {
          StartEvent(e, when);
        }
        break;
      case EventStage::kPrequeue:
        if (e.spec.starts_at != next_boundary_) continue;
        StartEvent(e, when);
        break;
      case EventStage::kRunning:
        if (e.spec.ends_at != next_boundary_) continue;
        e.stage = EventStage::kEnded;
        Note(NoticeKind::kEventEnded, when, kNoIndex, e.id);
        ComputeNextBoundary();
        ApplyEffective(when, /*fresh_presence=*/true);
        break;
      case EventStage::kEnded:
        continue;
    }
    return;
  }
  ComputeNextBoundary();  // not reached while the cache is right
}

void Room::OpenPrequeue(const RoomEvent& e, int64_t now) {
  Note(NoticeKind::kPrequeueOpened, now, kNoIndex, e.id);
  ++version_;
  if (e.spec.prequeue_scope != PrequeueScope::kAll) return;
  // Everyone goes to the draw: holders first (in admission order), then the line in order.
  SendHoldersBack(/*to_prequeue=*/true, now);
  std::vector<Index> waiting;
  waiting.reserve(line_.size());
  line_.ForEach([&](Line::Member m) { waiting.push_back(m); });
  // The line empties: what is left of the noted prefix is in the front line.
  near_noted_ = std::min(near_noted_, static_cast<int64_t>(front_.size()));
  for (Index i : waiting) {
    line_.Remove(slab_[i].ticket);
    slab_[i].status = SessionStatus::kPrequeue;
    slab_[i].ticket = prequeue_.PushBack(i);
  }
}

void Room::StartEvent(RoomEvent& e, int64_t now) {
  Note(NoticeKind::kEventStarted, now, kNoIndex, e.id);
  e.stage = EventStage::kRunning;
  ComputeNextBoundary();
  if (!prequeue_.empty() || e.spec.shuffle_at_start) {
    Draw d;
    d.event = e.id;
    d.shuffle = e.spec.shuffle_at_start;
    d.at = now;
    d.order.reserve(prequeue_.size());
    prequeue_.ForEach([&](Line::Member m) { d.order.push_back(m); });
    for (Index i : d.order) slab_[i].drawn = true;
    line_.Reserve(d.order.size());  // publishing the draw then never compacts the line
    prequeue_ = Line([this](Line::Member m, Line::Ticket t) { slab_[m].ticket = t; });
    draw_ = std::move(d);
    if (!draw_->shuffle && draw_->order.empty()) FinishDraw();
  }
  ApplyEffective(now, /*fresh_presence=*/true);
}

void Room::ReleasePrequeue() {
  if (draw_) return;  // arrivals during a draw stay behind it
  std::vector<Index> members;
  members.reserve(prequeue_.size());
  prequeue_.ForEach([&](Line::Member m) { members.push_back(m); });
  prequeue_ = Line([this](Line::Member m, Line::Ticket t) { slab_[m].ticket = t; });
  for (Index i : members) {
    slab_[i].status = SessionStatus::kWaiting;
    slab_[i].ticket = line_.PushBack(i);
  }
  ++version_;
}

OpResult<RoomEvent> Room::PutEvent(std::string_view id, const EventSpec& spec, int64_t now_ms) {
  Advance(now_ms);
  if (auto check = CheckEventChange(events_, id, spec, now_); !check.ok()) {
    return {check.status(), check.message()};
  }
  auto it = std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return e.id == id; });
  if (it == events_.end()) {
    events_.push_back(RoomEvent{.id = std::string(id), .spec = spec, .shuffle = std::nullopt});
  } else {
    bool suspending = spec.suspended && !it->spec.suspended;
    if (suspending && it->stage == EventStage::kPrequeue) ReleasePrequeue();
    it->spec = spec;
  }
  std::stable_sort(events_.begin(), events_.end(), [](const auto& a, const auto& b) {
    return a.spec.OpensAt() < b.spec.OpensAt();
  });
  ComputeNextBoundary();
  // A time already reached takes effect at the room's next Advance (the backend advances at
  // once): not here, so that what it brings is logged after this change, in time order.
  ApplyEffective(now_, /*fresh_presence=*/true);
  auto stored =
      std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return e.id == id; });
  return *stored;
}

OpResult<RoomEvent> Room::DeleteEvent(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  auto it = std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return e.id == id; });
  if (it == events_.end()) return {OpStatus::kNotFound, wire::UnknownEvent(id)};
  RoomEvent gone = std::move(*it);
  events_.erase(it);
  if (gone.stage == EventStage::kPrequeue && !gone.spec.suspended) ReleasePrequeue();
  ComputeNextBoundary();
  ApplyEffective(now_, /*fresh_presence=*/true);
  return gone;
}

// ---- holders sent back ---------------------------------------------------------------------

// Their tokens are revoked; they keep their head start: to the head of the line in admission
// order, or first into the pre-queue.
void Room::SendHoldersBack(bool to_prequeue, int64_t now) {
  std::vector<Index> holders;
  holders.reserve(held_.size());
  for (const auto& [admission, i] : held_) holders.push_back(i);
  std::sort(holders.begin(), holders.end(),
            [&](Index a, Index b) { return slab_[a].admission < slab_[b].admission; });
  // Told in admission order, whichever way they go back.
  for (Index i : holders) Note(NoticeKind::kRevoked, now, i);
  auto send_back = [&](Index i) {
    Session& s = slab_[i];
    Revoke(s, now);
    held_.erase(s.admission);
    --holders_;
    s.admission = 0;
    s.claimed = false;
    s.since = now;      // back in line: its wait starts again
    s.last_seen = now;  // a full check-in timeout to come back
    s.status = to_prequeue ? SessionStatus::kPrequeue : SessionStatus::kWaiting;
    deadlines_.Set(i, DueKey(s));
  };
  if (to_prequeue) {
    for (Index i : holders) {
      send_back(i);
      slab_[i].ticket = prequeue_.PushBack(i);
    }
  } else {
    for (auto it = holders.rbegin(); it != holders.rend(); ++it) {
      send_back(*it);
      slab_[*it].ticket = line_.PushFront(*it);
    }
    PrefixArrivals(holders);
  }
  ++version_;
}

// ---- the draw ------------------------------------------------------------------------------

bool Room::NeedsSeed() const { return draw_ && draw_->shuffle && !draw_->fy; }

bool Room::Drawing() const { return draw_ && (!draw_->shuffle || draw_->fy); }

size_t Room::DrawLeft() const {
  if (!draw_) return 0;
  size_t total = draw_->fy ? draw_->fy->size() : draw_->order.size();
  return total - draw_->published;
}

void Room::SeedDraw(const DrawSeed& seed) {
  if (!NeedsSeed()) return;
  int64_t count = static_cast<int64_t>(draw_->order.size());
  for (RoomEvent& e : events_) {
    if (e.id == draw_->event)
      e.shuffle = ShuffleOutcome{.seed = seed, .count = count, .at = draw_->at};
  }
  std::vector<uint32_t> order(draw_->order.begin(), draw_->order.end());
  draw_->order.clear();
  draw_->order.shrink_to_fit();
  draw_->fy.emplace(seed, std::move(order));
  if (count == 0) FinishDraw();
}

size_t Room::DrawStep(size_t max_positions, int64_t now_ms) {
  Advance(now_ms);
  if (!Drawing()) return 0;
  size_t from = draw_->published;
  size_t to;
  if (draw_->fy) {
    draw_->fy->Step(max_positions);
    to = draw_->fy->done();
  } else {
    to = std::min(draw_->order.size(), from + max_positions);
  }
  std::vector<Index> placed;
  placed.reserve(to - from);
  for (size_t k = from; k < to; ++k) {
    Index i = draw_->fy ? draw_->fy->order()[k] : draw_->order[k];
    Session& s = slab_[i];
    if (s.status != SessionStatus::kPrequeue || !s.drawn) continue;  // gone since
    s.drawn = false;
    s.status = SessionStatus::kWaiting;
    placed.push_back(i);
  }
  Line::Ticket first = line_.Append(placed);
  for (size_t k = 0; k < placed.size(); ++k) {
    slab_[placed[k]].ticket = first + static_cast<Line::Ticket>(k);
  }
  draw_->published = to;
  ++version_;
  if (DrawLeft() == 0) FinishDraw();
  Fill(now_);
  return to - from;
}

void Room::FinishDraw() {
  draw_.reset();
  ReleasePrequeue();  // those who came during the draw, in arrival order
  free_.insert(free_.end(), free_after_draw_.begin(), free_after_draw_.end());
  free_after_draw_.clear();
  ++version_;
}

void Room::set_seed(const DrawSeed& seed) {
  seed_ = seed;
  picks_.reset();
  picks_used_ = 0;
}

Room::Index Room::NextToAdmit() { return front_.empty() ? PickNext() : front_.Front(); }

Room::Index Room::PickNext() {
  if (config_.queueing_method != QueueingMethod::kRandom) return line_.Front();
  if (!picks_) {
    picks_.emplace(seed_);
    picks_->SkipTo(picks_used_);
  }
  uint32_t k = picks_->Below(static_cast<uint32_t>(line_.size()));
  picks_used_ = picks_->words_used();
  return line_.At(static_cast<int64_t>(k) + 1);
}

// ---- what a status shows -------------------------------------------------------------------

RoomPhase PhaseOf(QueueingMethod m, bool prequeue_open, int64_t waiting, int64_t holders,
                  int64_t capacity, bool paused) {
  if (m == QueueingMethod::kReject) return RoomPhase::kClosed;
  if (prequeue_open) return RoomPhase::kPrequeue;
  if (m == QueueingMethod::kPassthrough) return RoomPhase::kOpen;
  if (waiting > 0 || holders >= capacity || paused || m == QueueingMethod::kQueueAll) {
    return RoomPhase::kQueue;
  }
  return RoomPhase::kOpen;
}

RoomPhase Room::Phase() const {
  return PhaseOf(config_.queueing_method, PrequeueOpen(), waiting(), holders_, config_.capacity,
                 config_.paused);
}

std::optional<WaitOdds> RandomOdds(int64_t waiting, const Flow& flow,
                                   std::optional<int64_t> admit_per_minute, bool moving) {
  if (waiting <= 0) return std::nullopt;
  WaitOdds odds;
  odds.chance_next = 1.0 / static_cast<double>(waiting);
  if (!moving) return odds;
  // Admissions come no faster than the rate cap lets them (a known rate: no noise to allow for).
  Flow f = flow;
  if (admit_per_minute) {
    double cap = static_cast<double>(*admit_per_minute) / MinuteWindow::kWindowMs;
    if (cap <= f.out_per_ms) {
      f.out_per_ms = cap;
      f.out_events = 0;
    }
  }
  odds.p25_ms = RandomWaitMs(waiting, f, 0.25);
  odds.p50_ms = RandomWaitMs(waiting, f, 0.5);
  odds.p75_ms = RandomWaitMs(waiting, f, 0.75);
  return odds;
}

int64_t RefreshAfterMs(SessionStatus status, int64_t checkin_timeout_ms,
                       std::optional<int64_t> idle_timeout_ms, std::optional<int64_t> starts_in_ms,
                       std::optional<int64_t> eta_ms) {
  int64_t presence = checkin_timeout_ms;
  if (idle_timeout_ms) presence = std::min(presence, *idle_timeout_ms);
  int64_t half = presence / 2;
  switch (status) {
    case SessionStatus::kPrequeue:
      if (starts_in_ms.value_or(0) == 0) return kDrawingRefreshMs;
      return Clamp(std::min(half, *starts_in_ms), kMinRefreshMs, kMaxRefreshMs);
    case SessionStatus::kWaiting: {
      // Sooner near the front: about half the expected wait.
      int64_t soon = eta_ms ? std::max<int64_t>(*eta_ms / 2, kMinRefreshMs) : kWaitingRefreshMaxMs;
      return Clamp(std::min({half, kWaitingRefreshMaxMs, soon}), kMinRefreshMs, kMaxRefreshMs);
    }
    case SessionStatus::kActive:
    case SessionStatus::kGrace:
      return Clamp(half, kMinRefreshMs, kMaxRefreshMs);
    case SessionStatus::kClosed:
      return kMaxRefreshMs;
    case SessionStatus::kGone:
      break;
  }
  return 0;  // gone: join again now
}

std::optional<WaitOdds> Room::Odds(int64_t now) const {
  bool moving = !config_.paused && config_.queueing_method != QueueingMethod::kQueueAll;
  return RandomOdds(waiting(), FlowAt(now), config_.admit_per_minute, moving);
}

const RoomEvent* Room::StatusEvent() const {
  const RoomEvent* e = OpenEvent();
  if (e == nullptr && upcoming_ >= 0) e = &events_[static_cast<size_t>(upcoming_)];
  return e;
}

void Room::AddEventFields(SessionView& v, int64_t now) const {
  v.phase = Phase();
  v.queueing_method = config_.queueing_method;
  if (const RoomEvent* e = StatusEvent()) {
    if (e->spec.starts_at > now) v.starts_in_ms = e->spec.starts_at - now;
    if (e->spec.ends_at > now) v.ends_in_ms = e->spec.ends_at - now;
  }
  if (v.status == SessionStatus::kPrequeue && !v.starts_in_ms) v.starts_in_ms = 0;  // drawing
  v.refresh_after_ms = RefreshAfterMs(v.status, config_.checkin_timeout_ms, config_.idle_timeout_ms,
                                      v.starts_in_ms, v.eta_ms);
}

SessionView Room::ClosedView(std::string_view id) const {
  SessionView v = GoneView(id);
  v.status = SessionStatus::kClosed;
  AddEventFields(v, now_);
  return v;
}

}  // namespace anteroom::core
