#include "core/room.h"

#include <algorithm>

namespace anteroom::core {

namespace {
constexpr uint32_t kNoIndex = UINT32_MAX;
constexpr int kKindDropout = 0;  // waiting drop-outs sort before every other event at a time
constexpr int kKindOther = 1;

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
}

namespace {
bool Within(int64_t v, int64_t min, int64_t max) { return v >= min && v <= max; }
bool UrlInRange(const std::optional<std::string>& url) {
  return !url || url->size() <= kMaxTargetUrlBytes;
}
}  // namespace

bool InRange(const RoomConfig& c) {
  return Within(c.capacity, 1, kMaxCapacity) && Within(c.grace_ms, 0, kMaxDurationMs) &&
         Within(c.checkin_timeout_ms, 0, kMaxDurationMs) &&
         (!c.idle_timeout_ms || Within(*c.idle_timeout_ms, 0, kMaxDurationMs)) &&
         (!c.admit_per_minute || Within(*c.admit_per_minute, 1, kMaxAdmitPerMinute)) &&
         UrlInRange(c.target_url);
}

bool InRange(const RoomPatch& p) {
  return (!p.capacity || Within(*p.capacity, 1, kMaxCapacity)) &&
         (!p.grace_ms || Within(*p.grace_ms, 0, kMaxDurationMs)) &&
         (!p.checkin_timeout_ms || Within(*p.checkin_timeout_ms, 0, kMaxDurationMs)) &&
         (!p.idle_timeout_ms || !*p.idle_timeout_ms ||
          Within(**p.idle_timeout_ms, 0, kMaxDurationMs)) &&
         (!p.admit_per_minute || !*p.admit_per_minute ||
          Within(**p.admit_per_minute, 1, kMaxAdmitPerMinute)) &&
         (!p.target_url || UrlInRange(*p.target_url));
}

std::optional<int64_t> EtaMs(int64_t position, int64_t freed_last_minute,
                             std::optional<int64_t> admit_per_minute) {
  if (freed_last_minute == 0) return std::nullopt;
  int64_t eta = CeilDiv(position * MinuteWindow::kWindowMs, freed_last_minute);
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
  }
  return "gone";
}

Room::Room(RoomConfig config, int64_t revocation_ttl_ms, int64_t now_ms)
    : config_(config),
      revocation_ttl_ms_(revocation_ttl_ms),
      now_(now_ms),
      index_(0, IdHash{&slab_}, IdEq{&slab_}),
      line_([this](Line::Member m, Line::Ticket t) { slab_[m].ticket = t; }),
      version_(static_cast<uint64_t>(now_ms) << 20) {}

// ---- queries -------------------------------------------------------------------------------

Room::Index Room::Find(std::string_view id) const {
  auto it = index_.find(id);
  return it == index_.end() ? kNoIndex : *it;
}

int64_t Room::NextDeadline() const {
  uint64_t k = std::min(deadlines_.empty() ? kNever : deadlines_.Top().key, RateOpenKey(now_));
  return k == kNever ? INT64_MAX : static_cast<int64_t>(k >> 1);
}

uint64_t Room::DueKey(const Session& s) const {
  switch (s.status) {
    case SessionStatus::kWaiting:
      return Key(s.last_seen + config_.checkin_timeout_ms, kKindDropout);
    case SessionStatus::kActive: {
      int64_t t = INT64_MAX;
      if (config_.idle_timeout_ms) t = s.last_seen + *config_.idle_timeout_ms;
      if (!s.claimed) t = std::min(t, s.since + config_.checkin_timeout_ms);
      return t == INT64_MAX ? kNever : Key(t, kKindOther);
    }
    case SessionStatus::kGrace:
      return Key(s.since, kKindOther);
    case SessionStatus::kGone:
      break;
  }
  return kNever;
}

uint64_t Room::RateOpenKey(int64_t now) const {
  if (config_.paused || !config_.admit_per_minute || line_.empty() ||
      holders_ >= config_.capacity) {
    return kNever;
  }
  return Key(admitted_window_.NextBelow(now, *config_.admit_per_minute), kKindOther);
}

std::optional<int64_t> Room::Eta(int64_t position, int64_t now) const {
  if (config_.paused) return std::nullopt;  // nobody moves until an admin resumes
  return EtaMs(position, freed_window_.Count(now), config_.admit_per_minute);
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
    v.position = line_.Position(s.ticket);
    v.eta_ms = Eta(v.position, now);
  } else {
    v.admission = s.admission;
    v.eta_ms = 0;
  }
  return v;
}

SessionView Room::GoneView(std::string_view id) const {
  SessionView v;
  v.session = std::string(id);
  v.status = SessionStatus::kGone;
  v.waiting = waiting();
  v.active = holders_;
  v.capacity = config_.capacity;
  return v;
}

size_t Room::MemoryBytes() const {
  size_t bytes = slab_.capacity() * sizeof(Session) + free_.capacity() * sizeof(Index);
  for (const Session& s : slab_) bytes += s.id.HeapBytes();
  bytes += index_.bucket_count() * (sizeof(Index) + 1);  // one metadata byte per slot
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
  s.status = SessionStatus::kWaiting;
  index_.insert(i);
  s.ticket = line_.PushBack(i);
  deadlines_.Set(i, DueKey(s));
  ++version_;
  return i;
}

void Room::Free(Index i) {
  ++version_;
  index_.erase(i);  // before the id is cleared: the hash reads it
  if (deadlines_.Contains(i)) deadlines_.Remove(i);
  Session& s = slab_[i];
  s.id.Clear();
  s.status = SessionStatus::kGone;
  free_.push_back(i);
}

void Room::DropWaiting(Index i) {
  line_.Remove(slab_[i].ticket);
  Free(i);
}

void Room::Reschedule(Index i) {
  uint64_t due = DueKey(slab_[i]);
  if (!deadlines_.Contains(i) || due < deadlines_.KeyOf(i)) deadlines_.Set(i, due);
}

void Room::RekeyAll() {
  for (Index i : index_) deadlines_.Set(i, DueKey(slab_[i]));
}

void Room::Admit(Index i, int64_t now) {
  Session& s = slab_[i];
  line_.Remove(s.ticket);
  ++version_;
  s.status = SessionStatus::kActive;
  s.claimed = false;  // admitted while not calling in: must claim with a check
  s.since = now;
  s.last_seen = now;
  s.admission = ++admissions_;
  ++holders_;
  ++counters_.admitted_total;
  admitted_window_.Add(now);
  deadlines_.Set(i, DueKey(s));
}

void Room::Release(Index i, int64_t now, bool dropped) {
  --holders_;
  ++counters_.released_total;
  if (dropped) ++counters_.dropped_total;
  freed_window_.Add(now);
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
  if (config_.paused) return;  // freed slots stay free; resuming (Reconfigure) fills them
  while (!line_.empty() && holders_ < config_.capacity) {
    if (config_.admit_per_minute && admitted_window_.Count(now) >= *config_.admit_per_minute) {
      return;  // the rate cap holds the slot free; RateOpenKey schedules the next try
    }
    Admit(line_.Front(), now);
  }
}

// ---- time ----------------------------------------------------------------------------------

void Room::ProcessDue(Index i, int64_t when) {
  Session& s = slab_[i];
  switch (s.status) {
    case SessionStatus::kWaiting:
      ++counters_.dropped_total;
      DropWaiting(i);
      return;
    case SessionStatus::kActive:
      if (!s.claimed && s.since + config_.checkin_timeout_ms <= when) {
        Release(i, when, /*dropped=*/true);
      } else {  // idle: treated as having left at this moment
        ++version_;
        s.status = SessionStatus::kGrace;
        s.since = when + config_.grace_ms;
        deadlines_.Set(i, DueKey(s));
      }
      return;
    case SessionStatus::kGrace:
      Release(i, when, /*dropped=*/false);
      return;
    case SessionStatus::kGone:
      return;
  }
}

void Room::Advance(int64_t now_ms) {
  int64_t target = std::max(now_ms, now_);
  while (true) {
    uint64_t heap_key = deadlines_.empty() ? kNever : deadlines_.Top().key;
    uint64_t rate_key = RateOpenKey(now_);
    uint64_t key = std::min(heap_key, rate_key);
    if (key == kNever || static_cast<int64_t>(key >> 1) > target) break;
    int64_t when = std::max(static_cast<int64_t>(key >> 1), now_);
    if (heap_key <= rate_key) {
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
    Fill(when);
  }
  now_ = target;
  ForgetOldRevocations(now_);
}

// ---- operations ----------------------------------------------------------------------------

void Room::Reconfigure(const RoomPatch& patch, int64_t now_ms) {
  Advance(now_ms);
  ++version_;
  patch.ApplyTo(config_);
  if (patch.grace_ms || patch.checkin_timeout_ms || patch.idle_timeout_ms) RekeyAll();
  Fill(now_);
}

SessionView Room::Check(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) {
    i = Join(id, now_);
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
    s.status = SessionStatus::kActive;
    s.claimed = true;
    Reschedule(i);
  }
}

std::vector<SessionView> Room::Present(const std::vector<std::string>& ids, int64_t now_ms) {
  Advance(now_ms);
  std::vector<SessionView> views;
  views.reserve(ids.size());
  for (const std::string& id : ids) {
    Index i = Find(id);
    if (i == kNoIndex) {
      views.push_back(GoneView(id));
      continue;
    }
    slab_[i].last_seen = now_;  // only later: the heap key stays (lazily re-keyed)
    ClaimPresence(i);
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
  v.freed_last_minute = freed_window_.Count(now_);
  v.admit_per_minute = config_.admit_per_minute;
  v.paused = config_.paused;
  v.checkin_timeout_ms = config_.checkin_timeout_ms;
  v.idle_timeout_ms = config_.idle_timeout_ms;
  v.changed = version_ != since;
  if (v.changed) {
    v.line.Reserve(line_.size(), line_.size() * SessionId::kInline);
    line_.ForEach([&](Line::Member m) { v.line.Add(slab_[m].id.view()); });
  }
  return v;
}

OpResult<SessionView> Room::Touch(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) return {OpStatus::kUnknownSession, "the room does not know this session"};
  Session& s = slab_[i];
  s.last_seen = now_;
  if (s.status == SessionStatus::kGrace) {
    s.status = SessionStatus::kActive;
    ++version_;
  }
  Reschedule(i);
  return View(i, now_);
}

OpResult<SessionView> Room::Leave(std::string_view id, bool final, int64_t now_ms) {
  Advance(now_ms);
  Index i = Find(id);
  if (i == kNoIndex) return {OpStatus::kUnknownSession, "the room does not know this session"};
  Session& s = slab_[i];
  if (s.status == SessionStatus::kWaiting || final) return End(i, id);
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
  if (i == kNoIndex) return {OpStatus::kUnknownSession, "the room does not know this session"};
  return End(i, id);
}

SessionView Room::End(Index i, std::string_view id) {
  if (slab_[i].status == SessionStatus::kWaiting) {
    DropWaiting(i);
  } else {
    Release(i, now_, /*dropped=*/false);
    Fill(now_);
  }
  return GoneView(id);  // `id` is the caller's: the slab's copy is gone
}

bool Room::IsRevoked(std::string_view id, uint64_t admission, int64_t now_ms) {
  Advance(now_ms);
  auto it = revoked_.find(std::string(id));
  return it != revoked_.end() && admission <= it->second.admission;
}

}  // namespace anteroom::core
