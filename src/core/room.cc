#include "core/room.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/wire_errors.h"

namespace anteroom::core {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

void RoomPatch::ApplyTo(RoomConfig& config) const {
  if (capacity) config.capacity = *capacity;
  if (grace_ms) config.grace_ms = *grace_ms;
  if (checkin_timeout_ms) config.checkin_timeout_ms = *checkin_timeout_ms;
  if (idle_timeout_ms) config.idle_timeout_ms = *idle_timeout_ms;
  if (admit_per_minute) config.admit_per_minute = *admit_per_minute;
  if (paused) config.paused = *paused;
  if (target_url) config.target_url = *target_url;
  if (joins_per_minute_per_client) {
    config.joins_per_minute_per_client = *joins_per_minute_per_client;
  }
  if (places_per_client) config.places_per_client = *places_per_client;
  if (challenge_difficulty) config.challenge_difficulty = *challenge_difficulty;
  if (gate) config.gate = *gate;
  if (page) config.page = *page;
  if (notify_at_position) config.notify_at_position = *notify_at_position;
  if (queueing_method) config.queueing_method = *queueing_method;
}

namespace {
bool Within(int64_t v, int64_t min, int64_t max) { return v >= min && v <= max; }
bool UrlInRange(const std::optional<std::string>& url) {
  return !url || url->size() <= kMaxTargetUrlBytes;
}
bool GateInRange(const std::optional<std::string>& gate) {
  return !gate || gate->size() <= kMaxGateBytes;
}
bool PageInRange(const std::optional<std::string>& page) {
  return !page || page->size() <= kMaxPageBytes;
}
}  // namespace

bool InRange(const RoomConfig& c) {
  return Within(c.capacity, 1, kMaxCapacity) && Within(c.grace_ms, 0, kMaxDurationMs) &&
         Within(c.checkin_timeout_ms, 0, kMaxDurationMs) &&
         (!c.idle_timeout_ms || Within(*c.idle_timeout_ms, 0, kMaxDurationMs)) &&
         (!c.admit_per_minute || Within(*c.admit_per_minute, 1, kMaxAdmitPerMinute)) &&
         UrlInRange(c.target_url) &&
         (!c.joins_per_minute_per_client ||
          Within(*c.joins_per_minute_per_client, 1, kMaxJoinsPerMinutePerClient)) &&
         (!c.places_per_client || Within(*c.places_per_client, 1, kMaxPlacesPerClient)) &&
         (!c.challenge_difficulty ||
          Within(*c.challenge_difficulty, kMinChallengeDifficulty, kMaxChallengeDifficulty)) &&
         GateInRange(c.gate) && PageInRange(c.page) &&
         (!c.notify_at_position || Within(*c.notify_at_position, 1, kMaxNotifyAtPosition));
}

bool InRange(const RoomPatch& p) {
  return (!p.capacity || Within(*p.capacity, 1, kMaxCapacity)) &&
         (!p.grace_ms || Within(*p.grace_ms, 0, kMaxDurationMs)) &&
         (!p.checkin_timeout_ms || Within(*p.checkin_timeout_ms, 0, kMaxDurationMs)) &&
         (!p.idle_timeout_ms || !*p.idle_timeout_ms ||
          Within(**p.idle_timeout_ms, 0, kMaxDurationMs)) &&
         (!p.admit_per_minute || !*p.admit_per_minute ||
          Within(**p.admit_per_minute, 1, kMaxAdmitPerMinute)) &&
         (!p.target_url || UrlInRange(*p.target_url)) &&
         (!p.joins_per_minute_per_client || !*p.joins_per_minute_per_client ||
          Within(**p.joins_per_minute_per_client, 1, kMaxJoinsPerMinutePerClient)) &&
         (!p.places_per_client || !*p.places_per_client ||
          Within(**p.places_per_client, 1, kMaxPlacesPerClient)) &&
         (!p.challenge_difficulty || !*p.challenge_difficulty ||
          Within(**p.challenge_difficulty, kMinChallengeDifficulty, kMaxChallengeDifficulty)) &&
         (!p.gate || GateInRange(*p.gate)) && (!p.page || PageInRange(*p.page)) &&
         (!p.notify_at_position || !*p.notify_at_position ||
          Within(**p.notify_at_position, 1, kMaxNotifyAtPosition));
}

std::optional<int64_t> EtaMs(int64_t position, const Flow& flow,
                             std::optional<int64_t> admit_per_minute) {
  if (!(flow.out_per_ms > 0)) return std::nullopt;
  // Waits beyond about 10 years are shown as that (as RandomWaitMs does).
  double t = std::min(std::ceil(static_cast<double>(position) / flow.out_per_ms), 3.2e11);
  int64_t eta = static_cast<int64_t>(t);
  if (admit_per_minute) {
    eta = std::max(eta, CeilDiv(position * MinuteWindow::kWindowMs, *admit_per_minute));
  }
  return eta;
}

const char* ToString(SessionStatus status) {
  switch (status) {
    case SessionStatus::kWaiting:
      return "waiting";
    case SessionStatus::kActive:
      return "active";
    case SessionStatus::kGrace:
      return "grace";
    case SessionStatus::kGone:
      return "gone";
    case SessionStatus::kPrequeue:
      return "prequeue";
    case SessionStatus::kClosed:
      return "closed";
  }
  return "gone";
}

Room::Room(RoomConfig config, int64_t revocation_ttl_ms, int64_t now_ms)
    : own_(config),
      config_(config),
      revocation_ttl_ms_(revocation_ttl_ms),
      now_(now_ms),
      index_(IdHash{&slab_}, IdEq{&slab_}),
      line_([this](Line::Member m, Line::Ticket t) { slab_[m].ticket = t; }),
      version_(static_cast<uint64_t>(now_ms) << 20),
      client_index_(ClientHash{&clients_}, ClientEq{&clients_}),
      prequeue_([this](Line::Member m, Line::Ticket t) { slab_[m].ticket = t; }),
      front_([this](Line::Member m, Line::Ticket t) { slab_[m].ticket = t; }) {}

// ---- queries -------------------------------------------------------------------------------

Room::Index Room::Find(std::string_view id) const { return index_.find(id).value_or(kNoIndex); }

int64_t Room::NextDeadline() const {
  if (Drawing() || NeedsSeed()) return now_;  // the backend publishes the draw, a chunk a tick
  uint64_t k = std::min(
      {deadlines_.empty() ? kNever : deadlines_.Top().key, RateOpenKey(now_), BoundaryKey()});
  return k == kNever ? INT64_MAX : static_cast<int64_t>(k >> 1);
}

uint64_t Room::DueKey(const Session& s) const {
  bool by_time = presence_ != Presence::kReplayed;  // presence deadlines (see set_presence)
  switch (s.status) {
    case SessionStatus::kWaiting:
    case SessionStatus::kPrequeue:
      return by_time ? Key(s.last_seen + config_.checkin_timeout_ms, kKindDropout) : kNever;
    case SessionStatus::kActive: {
      int64_t t = INT64_MAX;
      if (config_.idle_timeout_ms && by_time) t = s.last_seen + *config_.idle_timeout_ms;
      if (!s.claimed) t = std::min(t, s.since + config_.checkin_timeout_ms);
      return t == INT64_MAX ? kNever : Key(t, kKindOther);
    }
    case SessionStatus::kGrace:
      return Key(s.since, kKindOther);
    case SessionStatus::kGone:
    case SessionStatus::kClosed:
      break;
  }
  return kNever;
}

uint64_t Room::RateOpenKey(int64_t now) const {
  QueueingMethod m = config_.queueing_method;
  if (config_.paused || !config_.admit_per_minute || waiting() == 0 ||
      holders_ >= config_.capacity || m == QueueingMethod::kQueueAll ||
      m == QueueingMethod::kPassthrough) {
    return kNever;
  }
  return Key(admitted_window_.NextBelow(now, *config_.admit_per_minute), kKindOther);
}

std::optional<int64_t> Room::Eta(int64_t position, int64_t now) const {
  // Nobody moves until an admin resumes or lets go of the brake.
  if (config_.paused || config_.queueing_method == QueueingMethod::kQueueAll) return std::nullopt;
  // fifo: the outflow alone.
  return EtaMs(position, Flow{RateAt(outflow_, outflow_memo_, now).per_ms, 0},
               config_.admit_per_minute);
}

Measured Room::RateAt(const FlowHistory& history, RateMemo& memo, int64_t now) const {
  int64_t second = now >= 0 ? now / 1000 : (now - 999) / 1000;
  if (second != memo.second) memo = {second, MeasureRate(history, now)};
  return memo.rate;
}

SessionView Room::View(Index i, int64_t now) const {
  const Session& s = slab_[i];
  SessionView v;
  v.session = std::string(s.id.view());
  v.status = s.status;
  v.waiting = waiting();
  v.active = holders_;
  v.capacity = config_.capacity;
  if (s.status == SessionStatus::kWaiting) {
    if (config_.queueing_method == QueueingMethod::kRandom) {
      v.odds = Odds(now);
      if (v.odds) v.eta_ms = v.odds->p50_ms;
    } else {
      v.position = s.front ? front_.Position(s.ticket)
                           : static_cast<int64_t>(front_.size()) + line_.Position(s.ticket);
      v.eta_ms = Eta(v.position, now);
    }
  } else if (s.status != SessionStatus::kPrequeue) {
    v.admission = s.admission;
    v.incarnation = incarnation_;
    v.eta_ms = 0;
  }
  AddEventFields(v, now);
  return v;
}

SessionView Room::GoneView(std::string_view id) const {
  SessionView v;
  v.session = std::string(id);
  v.status = SessionStatus::kGone;
  v.waiting = waiting();
  v.active = holders_;
  v.capacity = config_.capacity;
  AddEventFields(v, now_);
  return v;
}

size_t Room::MemoryBytes() const {
  size_t bytes = slab_.capacity() * sizeof(Session) + free_.capacity() * sizeof(Index);
  for (const Session& s : slab_) bytes += s.id.HeapBytes();
  bytes += index_.bucket_count() * (sizeof(Index) + 1);  // one metadata byte per slot
  bytes += clients_.capacity() * sizeof(Client) + free_clients_.capacity() * sizeof(uint32_t);
  for (const Client& c : clients_) bytes += c.key.capacity() > 15 ? c.key.capacity() : 0;
  bytes += client_index_.bucket_count() * (sizeof(uint32_t) + 1) + client_refills_.MemoryBytes();
  bytes += held_.bucket_count() * (sizeof(uint64_t) + sizeof(Index) + 1);
  bytes += prequeue_.MemoryBytes() + free_after_draw_.capacity() * sizeof(Index);
  if (draw_)
    bytes += draw_->order.capacity() * sizeof(Index) +
             (draw_->fy ? draw_->fy->size() * sizeof(uint32_t) : 0);
  bytes += front_.MemoryBytes() + passes_.size() * (sizeof(RoomPass) + 64);
  return bytes + line_.MemoryBytes() + deadlines_.MemoryBytes();
}

// ---- session bookkeeping -------------------------------------------------------------------

Room::Index Room::Join(std::string_view id, int64_t now) {
  Index i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
  } else {
    i = static_cast<Index>(slab_.size());
    slab_.emplace_back();
  }
  Session& s = slab_[i];
  s = Session{};
  s.id.Assign(id);
  s.last_seen = now;
  s.since = now;
  index_.insert(i);
  if (PrequeueOpen()) {
    s.status = SessionStatus::kPrequeue;
    s.ticket = prequeue_.PushBack(i);
  } else {
    s.status = SessionStatus::kWaiting;
    s.ticket = line_.PushBack(i);
    inflow_.Add(now);
    inflow_memo_ = {};
  }
  deadlines_.Set(i, DueKey(s));
  ++version_;
  ++checkin_changes_;
  Note(NoticeKind::kJoined, now, i);
  return i;
}

void Room::Free(Index i) {
  ++version_;
  index_.erase(i);  // before the id is cleared: the hash reads it
  if (deadlines_.Contains(i)) deadlines_.Remove(i);
  CountGone(i);
  // Nothing of the session stays behind: its last check-in time, which only the live room
  // knows (check-ins are not all logged), would make equal states save differently.
  slab_[i] = Session{};
  slab_[i].status = SessionStatus::kGone;
  // A draw's order names indices: none is reused while one is on.
  (draw_ ? free_after_draw_ : free_).push_back(i);
}

void Room::Unline(Index i) {
  Session& s = slab_[i];
  if (s.status == SessionStatus::kWaiting) {
    Unprefix(s);
    (s.front ? front_ : line_).Remove(s.ticket);
    s.front = false;
  } else if (s.status == SessionStatus::kPrequeue && !s.drawn) {
    prequeue_.Remove(s.ticket);
  }  // drawn: the draw skips it when it comes to its place (its slot is gone by then)
}

void Room::DropWaiting(Index i) {
  Unline(i);
  Free(i);
}

void Room::Reschedule(Index i) {
  uint64_t due = DueKey(slab_[i]);
  if (!deadlines_.Contains(i) || due < deadlines_.KeyOf(i)) deadlines_.Set(i, due);
}

void Room::RekeyAll() {
  index_.ForEach([this](Index i) { deadlines_.Set(i, DueKey(slab_[i])); });
}

void Room::Admit(Index i, int64_t now) {
  Session& s = slab_[i];
  int64_t joined = s.since;
  Unline(i);
  ++version_;
  s.status = SessionStatus::kActive;
  s.claimed = false;  // admitted while not calling in: must claim with a check
  s.since = now;
  s.last_seen = now;
  s.admission = ++admissions_;
  held_[s.admission] = i;
  ++holders_;
  ++counters_.admitted_total;
  Note(NoticeKind::kAdmitted, now, i);
  if (noting_ && joined > 0) notices_.back().waited_ms = now - joined;
  admitted_window_.Add(now);
  deadlines_.Set(i, DueKey(s));
}

void Room::Release(Index i, int64_t now, bool dropped) {
  --holders_;
  ++counters_.released_total;
  if (dropped) ++counters_.dropped_total;
  outflow_.Add(now);
  outflow_memo_ = {};
  held_.erase(slab_[i].admission);
  Revoke(slab_[i], now);
  Free(i);
}

void Room::Revoke(const Session& s, int64_t now) {
  int64_t until = now + revocation_ttl_ms_;
  std::string id(s.id.view());
  revoked_[id] = Revoked{s.admission, until};
  revoked_order_.emplace_back(until, std::move(id));
}

void Room::ForgetOldRevocations(int64_t now) {
  while (!revoked_order_.empty() && revoked_order_.front().first <= now) {
    auto it = revoked_.find(revoked_order_.front().second);
    if (it != revoked_.end() && it->second.until <= now) revoked_.erase(it);
    revoked_order_.pop_front();
  }
}

void Room::Fill(int64_t now) {
  AdmitWhileFree(now);
  SettleNear(now);
}

void Room::AdmitWhileFree(int64_t now) {
  if (config_.paused) return;  // freed slots stay free; resuming (Reconfigure) fills them
  switch (config_.queueing_method) {
    case QueueingMethod::kQueueAll:
      return;  // the brake: letting go of it (Reconfigure, an event's end) fills them
    case QueueingMethod::kPassthrough:
      while (waiting() > 0) Admit(NextToAdmit(), now);  // nobody waits, whatever the capacity
      return;
    default:
      break;
  }
  while (waiting() > 0 && holders_ < config_.capacity) {
    if (config_.admit_per_minute && admitted_window_.Count(now) >= *config_.admit_per_minute) {
      return;  // the rate cap holds the slot free; RateOpenKey schedules the next try
    }
    Admit(NextToAdmit(), now);
  }
}

// ---- time ----------------------------------------------------------------------------------

void Room::ProcessDue(Index i, int64_t when) {
  Session& s = slab_[i];
  switch (s.status) {
    case SessionStatus::kWaiting:
    case SessionStatus::kPrequeue:
      ReportSeenExpiry(i);
      ++counters_.dropped_total;
      Note(NoticeKind::kDropped, when, i);
      DropWaiting(i);
      return;
    case SessionStatus::kActive:
      // Decided at the deadline's own time, not the room's (later when a reconfiguration moved
      // it into the past): an idle expiry keyed before the claim deadline is an idle expiry,
      // wherever the room's clock is. A replay, which has no idle keys, agrees.
      if (!s.claimed &&
          s.since + config_.checkin_timeout_ms <= static_cast<int64_t>(deadlines_.KeyOf(i) >> 1)) {
        Note(NoticeKind::kDropped, when, i);
        Release(i, when, /*dropped=*/true);
      } else {
        ReportSeenExpiry(i);
        GoIdle(i, when);
      }
      return;
    case SessionStatus::kGrace:
      Note(NoticeKind::kExpired, when, i);
      Release(i, when, /*dropped=*/false);
      return;
    case SessionStatus::kGone:
    case SessionStatus::kClosed:
      return;
  }
}

void Room::GoIdle(Index i, int64_t when) {
  Session& s = slab_[i];
  ++version_;
  s.status = SessionStatus::kGrace;
  s.since = when + config_.grace_ms;
  deadlines_.Set(i, DueKey(s));
}

// Reports the deadline's own time, which orders it among the others on replay; it takes
// effect at the room's time if that is later (a deadline a reconfiguration moved into the past).
void Room::ReportSeenExpiry(Index i) {
  if (presence_ == Presence::kReported) {
    int64_t at = static_cast<int64_t>(deadlines_.KeyOf(i) >> 1);
    seen_expiries_.push_back(SeenExpiry{at, std::string(slab_[i].id.view())});
  }
}

void Room::Advance(int64_t now_ms) {
  int64_t target = std::max(now_ms, now_);
  ProcessBefore(Key(target + 1, kKindDropout));  // every key at or before `target`
  now_ = target;
  ForgetOldRevocations(now_);
  ForgetFullBuckets(now_);
}

// At equal keys: a session's deadline, then an event's stage change, then the rate cap.
// Notify when near is settled once all the deadlines of a millisecond are processed: those of
// one time go in the heap's tie order, which Redis's (room.lua) need not share, and the
// positions in between would differ. A replay's expiries (ApplySeenExpiry) leave their time
// unsettled for the deadlines of the same millisecond that follow, as the live room did.
void Room::ProcessBefore(uint64_t limit) {
  // The time of deadlines processed and not settled yet (-1: none).
  int64_t unsettled = std::exchange(unsettled_near_, -1);
  while (true) {
    uint64_t heap_key = deadlines_.empty() ? kNever : deadlines_.Top().key;
    uint64_t rate_key = RateOpenKey(now_);
    uint64_t boundary_key = BoundaryKey();
    uint64_t key = std::min({heap_key, rate_key, boundary_key});
    if (key >= limit) break;
    int64_t when = std::max(static_cast<int64_t>(key >> 1), now_);
    if (unsettled >= 0 && unsettled != when) {
      SettleNear(unsettled);
      unsettled = -1;
    }
    if (heap_key > key && boundary_key == key) {
      now_ = when;
      ProcessBoundary(when);
    } else if (heap_key == key) {
      Index i = deadlines_.Top().member;
      uint64_t due = DueKey(slab_[i]);
      if (due != heap_key) {  // a lazy key: the session was seen since; move it to its deadline
        deadlines_.Set(i, due);
        continue;
      }
      now_ = when;
      ProcessDue(i, when);
    }
    now_ = when;
    AdmitWhileFree(when);
    unsettled = when;
  }
  if (unsettled < 0) return;
  if (unsettled < static_cast<int64_t>(limit >> 1)) {
    SettleNear(unsettled);
  } else {
    unsettled_near_ = unsettled;  // more of that millisecond is to come (a replayed expiry)
  }
}

// In the live room this expiry was processed after every deadline keyed before (at, drop-out)
// and before those keyed after, at `at` or the room's time if later. Every drop-out is logged, so
// no timed deadline shares its key; an idle session's deadline shares (when, other) with timed
// ones, which it commutes with (going to grace frees no slot and admits nobody).
bool Room::ApplySeenExpiry(std::string_view id, int64_t at) {
  ProcessBefore(Key(at, kKindDropout));
  int64_t when = std::max(at, now_);
  now_ = when;
  if (unsettled_near_ >= 0 && unsettled_near_ != when) {
    SettleNear(std::exchange(unsettled_near_, -1));
  }
  Index i = Find(id);
  if (i == kNoIndex) return false;
  switch (slab_[i].status) {
    case SessionStatus::kWaiting:
    case SessionStatus::kPrequeue:
      ++counters_.dropped_total;
      Note(NoticeKind::kDropped, when, i);
      DropWaiting(i);
      break;
    case SessionStatus::kActive:
      GoIdle(i, when);
      break;
    default:
      return false;
  }
  AdmitWhileFree(when);
  unsettled_near_ = when;  // settled by the next ProcessBefore, past this millisecond
  return true;
}

void Room::Restart(int64_t now_ms, Presence presence) {
  Advance(now_ms);
  presence_ = presence;
  index_.ForEach([this](Index i) { slab_[i].last_seen = now_; });
  RekeyAll();
}

// ---- operations ----------------------------------------------------------------------------

void Room::Reconfigure(const RoomPatch& patch, int64_t now_ms) {
  Advance(now_ms);
  ++version_;
  bool new_rate = patch.joins_per_minute_per_client &&
                  *patch.joins_per_minute_per_client != config_.joins_per_minute_per_client;
  patch.ApplyTo(own_);
  Note(NoticeKind::kChanged, now_);
  // Debts are in units of the old rate: start every bucket full rather than convert them.
  if (new_rate) RefillAllBuckets();
  ApplyEffective(now_);
  if (patch.include_active && config_.queueing_method == QueueingMethod::kQueueAll) {
    SendHoldersBack(/*to_prequeue=*/false, now_);
  }
  SettleNear(now_);
}

OpResult<SessionView> Room::Check(std::string_view id, const Arrival& arrival, int64_t now_ms) {
  Advance(now_ms);
  Index known = Find(id);
  bool holds = known != kNoIndex && (slab_[known].status == SessionStatus::kActive ||
                                     slab_[known].status == SessionStatus::kGrace);
  if (!arrival.pass.empty() && !holds) {  // a pass is for getting in: a holder keeps it
    if (auto refusal = PassRefusal(arrival.pass)) return std::move(*refusal);
    if (known == kNoIndex) {
      if (auto refusal = JoinRefusal(arrival)) return std::move(*refusal);
    }
    return UsePass(id, arrival.client, PassIdOfCode(arrival.pass));
  }
  if (known == kNoIndex) {
    if (config_.queueing_method == QueueingMethod::kReject) return ClosedView(id);
    if (auto refusal = JoinRefusal(arrival)) return std::move(*refusal);
  }
  return CheckRecorded(id, arrival.client, now_);
}

SessionView Room::CheckRecorded(std::string_view id, std::string_view client, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) {
    if (config_.queueing_method == QueueingMethod::kReject) return ClosedView(id);
    i = Join(id, now_);
    CountJoin(i, client);
    Fill(now_);
  }
  Session& s = slab_[i];
  s.last_seen = now_;
  // A plain check-in only moves deadlines later: the heap key stays (lazily re-keyed).
  ClaimPresence(i);
  return View(i, now_);
}

void Room::ClaimPresence(Index i) {
  Session& s = slab_[i];
  if (s.status == SessionStatus::kGrace || (s.status == SessionStatus::kActive && !s.claimed)) {
    if (s.status == SessionStatus::kGrace) ++version_;
    ++checkin_changes_;
    s.status = SessionStatus::kActive;
    s.claimed = true;
    Reschedule(i);
  }
}

std::vector<SessionView> Room::Present(const std::vector<std::string>& ids, int64_t now_ms,
                                       std::vector<uint32_t>* changed) {
  Advance(now_ms);
  std::vector<SessionView> views;
  views.reserve(ids.size());
  for (uint32_t k = 0; k < ids.size(); ++k) {
    Index i = Find(ids[k]);
    if (i == kNoIndex) {
      views.push_back(GoneView(ids[k]));
      continue;
    }
    slab_[i].last_seen = now_;  // only later: the heap key stays (lazily re-keyed)
    uint64_t before = checkin_changes_;
    ClaimPresence(i);
    if (changed && checkin_changes_ != before) changed->push_back(k);
    views.push_back(View(i, now_));
  }
  return views;
}

LineView Room::ReadLine(uint64_t since, int64_t now_ms) {
  Advance(now_ms);
  LineView v;
  v.version = version_;
  v.active = holders_;
  v.waiting = waiting();
  v.capacity = config_.capacity;
  v.flow = FlowAt(now_);
  v.admit_per_minute = config_.admit_per_minute;
  v.paused = config_.paused;
  v.checkin_timeout_ms = config_.checkin_timeout_ms;
  v.idle_timeout_ms = config_.idle_timeout_ms;
  v.phase = Phase();
  v.queueing_method = config_.queueing_method;
  if (const RoomEvent* e = StatusEvent()) {
    v.event_starts_at = e->spec.starts_at;
    v.event_ends_at = e->spec.ends_at;
  }
  v.changed = version_ != since;
  if (v.changed) {
    size_t n = static_cast<size_t>(waiting());
    v.line.Reserve(n, n * SessionId::kInline);
    front_.ForEach([&](Line::Member m) { v.line.Add(slab_[m].id.view()); });
    line_.ForEach([&](Line::Member m) { v.line.Add(slab_[m].id.view()); });
  }
  return v;
}

OpResult<SessionView> Room::Touch(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) return {OpStatus::kUnknownSession, std::string(wire::kSessionNotInRoom)};
  Session& s = slab_[i];
  s.last_seen = now_;
  if (s.status == SessionStatus::kGrace) {
    s.status = SessionStatus::kActive;
    ++version_;
    ++checkin_changes_;
  }
  Reschedule(i);
  return View(i, now_);
}

OpResult<SessionView> Room::Leave(std::string_view id, bool final, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) return {OpStatus::kUnknownSession, std::string(wire::kSessionNotInRoom)};
  Session& s = slab_[i];
  if (s.status == SessionStatus::kWaiting || s.status == SessionStatus::kPrequeue || final) {
    return End(i, id, NoticeKind::kLeft);
  }
  if (s.status == SessionStatus::kActive) {
    ++version_;
    s.status = SessionStatus::kGrace;
    s.since = now_ + config_.grace_ms;
    Reschedule(i);
  }
  return View(i, now_);
}

OpResult<SessionView> Room::Evict(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) return {OpStatus::kUnknownSession, std::string(wire::kSessionNotInRoom)};
  return End(i, id, NoticeKind::kRevoked);
}

SessionView Room::End(Index i, std::string_view id, NoticeKind why) {
  Note(why, now_, i);
  SessionStatus st = slab_[i].status;
  if (st == SessionStatus::kWaiting || st == SessionStatus::kPrequeue) {
    DropWaiting(i);
    SettleNear(now_);
  } else {
    Release(i, now_, /*dropped=*/false);
    Fill(now_);
  }
  return GoneView(id);  // `id` is the caller's: the slab's copy is gone
}

// ---- notices -------------------------------------------------------------------------------

void Room::Note(NoticeKind kind, int64_t at, Index i, std::string detail, int64_t position) {
  uint64_t seq = ++notice_seq_;
  if (!noting_) return;
  RoomNotice& n = notices_.emplace_back();
  n.kind = kind;
  n.seq = seq;
  n.at = at;
  n.position = position;
  n.detail = std::move(detail);
  if (i != kNoIndex) {
    n.session = slab_[i].id.view();
    if (kind == NoticeKind::kAdmitted) n.admission = slab_[i].admission;
  }
}

// ---- notify when near ----------------------------------------------------------------------

int64_t Room::WaitingPosition(const Session& s) const {
  return s.front ? front_.Position(s.ticket)
                 : static_cast<int64_t>(front_.size()) + line_.Position(s.ticket);
}

Room::Index Room::WaitingAt(int64_t position) const {
  auto front = static_cast<int64_t>(front_.size());
  return position <= front ? front_.At(position) : line_.At(position - front);
}

// The prefix stays the first near_noted_ waiting: one of them leaving shortens it.
void Room::Unprefix(const Session& s) {
  if (near_noted_ > 0 && WaitingPosition(s) <= near_noted_) --near_noted_;
}

void Room::PrefixArrival(Index i, int64_t now) {
  Session& s = slab_[i];
  int64_t position = WaitingPosition(s);
  if (position > near_noted_) return;  // behind the prefix: SettleNear comes to it
  if (!s.near && position <= config_.notify_at_position.value_or(0)) {
    s.near = true;
    Note(NoticeKind::kPositionNear, now, i, {}, position);
  }
  if (s.near) {
    ++near_noted_;
  } else {
    near_noted_ = position - 1;  // one not noted ends the prefix
  }
}

void Room::PrefixArrivals(const std::vector<Index>& block) {
  if (block.empty()) return;
  int64_t first = static_cast<int64_t>(front_.size()) + 1;
  if (first > near_noted_) return;
  bool all_near = std::all_of(block.begin(), block.end(), [&](Index i) { return slab_[i].near; });
  near_noted_ = all_near ? near_noted_ + static_cast<int64_t>(block.size()) : first - 1;
}

void Room::SettleNear(int64_t now) {
  if (!config_.notify_at_position || config_.queueing_method == QueueingMethod::kRandom) return;
  int64_t until = std::min(*config_.notify_at_position, waiting());
  while (near_noted_ < until) {
    Index i = WaitingAt(++near_noted_);
    if (slab_[i].near) continue;
    slab_[i].near = true;
    Note(NoticeKind::kPositionNear, now, i, {}, near_noted_);
  }
}

RoomNotice Room::DeletionNotice(int64_t now_ms) {
  RoomNotice n;
  n.kind = NoticeKind::kDeleted;
  n.seq = ++notice_seq_;
  n.at = std::max(now_ms, now_);
  return n;
}

// ---- clients -------------------------------------------------------------------------------

uint32_t Room::FindClient(std::string_view key) const {
  return client_index_.find(key).value_or(kNoClient);
}

int64_t Room::PlacesOf(std::string_view client) const {
  uint32_t c = FindClient(client);
  return c == kNoClient ? 0 : clients_[c].places;
}

// Repaid at `rate` units per ms since debt_at (no overflow: the product stays below debt + rate).
int64_t Room::DebtAt(const Client& c, int64_t now) const {
  if (!config_.joins_per_minute_per_client || c.debt == 0) return 0;
  int64_t rate = *config_.joins_per_minute_per_client;
  int64_t elapsed = now - c.debt_at;
  if (elapsed >= CeilDiv(c.debt, rate)) return 0;
  return c.debt - elapsed * rate;
}

int64_t Room::FullAt(const Client& c) const {
  if (!config_.joins_per_minute_per_client) return c.debt_at;
  return c.debt_at + CeilDiv(c.debt, *config_.joins_per_minute_per_client);
}

std::optional<OpResult<SessionView>> Room::JoinRefusal(const Arrival& arrival) const {
  if (config_.challenge_difficulty && arrival.proof_bits < *config_.challenge_difficulty) {
    return OpResult<SessionView>(
        OpStatus::kChallengeRequired,
        wire::JoinNeedsChallenge(std::to_string(*config_.challenge_difficulty)));
  }
  if (arrival.client.empty() || !LimitsClients()) return std::nullopt;
  uint32_t c = FindClient(arrival.client);
  if (c == kNoClient) {
    if (client_index_.size() < max_clients_) return std::nullopt;  // a full bucket, no place
    return OpResult<SessionView>(OpStatus::kRateLimited,
                                 wire::ClientTableFull(std::to_string(max_clients_)))
        .WithRetryAfter(kTableFullRetryMs);
  }
  const Client& client = clients_[c];
  if (config_.places_per_client && client.places >= *config_.places_per_client) {
    return OpResult<SessionView>(
               OpStatus::kRateLimited,
               wire::PlacesPerClientUsed(std::to_string(*config_.places_per_client)))
        .WithRetryAfter(std::max<int64_t>(config_.checkin_timeout_ms, kPlacesRetryMinMs));
  }
  if (config_.joins_per_minute_per_client) {
    int64_t rate = *config_.joins_per_minute_per_client;
    int64_t over = DebtAt(client, now_) + kTokenUnits - kTokenUnits * rate;
    if (over > 0) {
      return OpResult<SessionView>(OpStatus::kRateLimited,
                                   wire::JoinsPerMinuteUsed(std::to_string(rate)))
          .WithRetryAfter(CeilDiv(over, rate));
    }
  }
  return std::nullopt;
}

void Room::CountJoin(Index i, std::string_view key) {
  if (key.empty() || !LimitsClients()) return;
  uint32_t c = FindClient(key);
  if (c == kNoClient) {
    if (!free_clients_.empty()) {
      c = free_clients_.back();
      free_clients_.pop_back();
    } else {
      c = static_cast<uint32_t>(clients_.size());
      clients_.emplace_back();
    }
    clients_[c] = Client{};
    clients_[c].key.assign(key);
    client_index_.insert(c);
  }
  Client& client = clients_[c];
  ++client.places;
  if (client_refills_.Contains(c)) client_refills_.Remove(c);  // it holds a place now
  if (config_.joins_per_minute_per_client) {
    client.debt = DebtAt(client, now_) + kTokenUnits;
    client.debt_at = now_;
  }
  slab_[i].client = c;
}

void Room::CountGone(Index i) {
  uint32_t c = slab_[i].client;
  if (c == kNoClient) return;
  slab_[i].client = kNoClient;
  Client& client = clients_[c];
  if (--client.places > 0) return;
  if (DebtAt(client, now_) == 0) return ForgetClient(c);
  client_refills_.Set(c, static_cast<uint64_t>(FullAt(client)));
}

void Room::ForgetClient(uint32_t c) {
  client_index_.erase(c);  // before the key is cleared: the hash reads it
  if (client_refills_.Contains(c)) client_refills_.Remove(c);
  clients_[c] = Client{};
  free_clients_.push_back(c);
}

void Room::ForgetFullBuckets(int64_t now) {
  while (!client_refills_.empty() && static_cast<int64_t>(client_refills_.Top().key) <= now) {
    ForgetClient(client_refills_.Top().member);
  }
}

void Room::RefillAllBuckets() {
  while (!client_refills_.empty()) ForgetClient(client_refills_.Top().member);
  client_index_.ForEach([this](uint32_t c) {
    clients_[c].debt = 0;
    clients_[c].debt_at = now_;
  });
}

bool Room::IsRevoked(std::string_view id, uint64_t admission, int64_t now_ms) {
  Advance(now_ms);
  auto it = revoked_.find(std::string(id));
  return it != revoked_.end() && admission <= it->second.admission;
}

std::optional<std::string> Room::AdmissionHolder(uint64_t admission, int64_t now_ms) {
  Advance(now_ms);
  auto it = held_.find(admission);
  if (it == held_.end()) return std::nullopt;
  return std::string(slab_[it->second].id.view());
}

}  // namespace anteroom::core
