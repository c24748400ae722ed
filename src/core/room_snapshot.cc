// Room snapshots: the state of core::Room written field by field, and read back into a room that
// behaves exactly like the original (same slab indices, same heap keys, same line order).
#include <algorithm>

#include "core/event_codec.h"
#include "core/room.h"

namespace anteroom::core {

namespace {
bool IsTime(int64_t ms) { return ms >= 0 && ms <= kLatestTimeMs; }

// The layout's version, written first. 3 (data format 6) drops the minute window of freed slots
// and adds at the end the ETA's flow histories (outflow, inflow), then notify_at_position, the
// noted prefix and the sessions that were told room.position_near; 2 (data format 5) adds at the
// end the page settings and the count of notices; 1 (data format 4) still loads, with no page
// settings and the notices counted from 1 again. Layouts 1 and 2 load with empty histories (the
// ETA measures again from the next slot freed). Any other is refused.
constexpr uint32_t kRoomFormat = 3;
constexpr uint32_t kRoomFormatV2 = 2;
constexpr uint32_t kRoomFormatV1 = 1;

void SaveOptional(ByteWriter& out, const std::optional<int64_t>& v) {
  out.PutBool(v.has_value());
  out.Put<int64_t>(v.value_or(0));
}

std::optional<int64_t> LoadOptional(ByteReader& in) {
  bool has = in.GetBool();
  int64_t v = in.Get<int64_t>();
  return has ? std::optional<int64_t>(v) : std::nullopt;
}
}  // namespace

void Room::Save(ByteWriter& out) const {
  out.Put(kRoomFormat);
  out.Put(own_.capacity);
  out.Put(own_.grace_ms);
  out.Put(own_.checkin_timeout_ms);
  SaveOptional(out, own_.idle_timeout_ms);
  SaveOptional(out, own_.admit_per_minute);
  out.PutBool(own_.paused);
  out.PutBool(own_.target_url.has_value());
  if (own_.target_url) out.PutString(*own_.target_url);
  SaveOptional(out, own_.joins_per_minute_per_client);
  SaveOptional(out, own_.places_per_client);
  SaveOptional(out, own_.challenge_difficulty);
  out.PutBool(own_.gate.has_value());
  if (own_.gate) out.PutString(*own_.gate);
  out.Put(static_cast<uint8_t>(own_.queueing_method));
  out.Put(revocation_ttl_ms_);
  out.Put(now_);

  out.Put<uint64_t>(slab_.size());
  for (const Session& s : slab_) {
    out.PutString(s.id.view());
    out.Put(s.last_seen);
    out.Put(s.since);
    out.Put(s.admission);
    out.Put(s.status);
    out.PutBool(s.claimed);
    out.PutBool(s.drawn);
    out.PutBool(s.front);
    out.Put(s.client);
  }
  out.Put<uint64_t>(free_.size());
  for (Index i : free_) out.Put(i);
  // Sorted, so equal rooms write equal bytes (the heap's layout depends on its history).
  std::vector<DeadlineHeap::Entry> heap = deadlines_.entries();
  std::sort(heap.begin(), heap.end(),
            [](const auto& a, const auto& b) { return a.member < b.member; });
  out.Put<uint64_t>(heap.size());
  for (const auto& e : heap) {
    out.Put(e.member);
    out.Put(e.key);
  }
  // The line in order: tickets are renumbered on load, only their order matters.
  std::vector<std::pair<Line::Ticket, Index>> waiting;
  waiting.reserve(line_.size());
  for (Index i = 0; i < slab_.size(); ++i) {
    const Session& s = slab_[i];
    if (s.status == SessionStatus::kWaiting && !s.front) waiting.emplace_back(s.ticket, i);
  }
  std::sort(waiting.begin(), waiting.end());
  out.Put<uint64_t>(waiting.size());
  for (const auto& w : waiting) out.Put(w.second);
  std::vector<Index> front;
  front_.ForEach([&](Line::Member m) { front.push_back(m); });
  out.Put<uint64_t>(front.size());
  for (Index i : front) out.Put(i);
  std::vector<Index> prequeued;
  prequeue_.ForEach([&](Line::Member m) { prequeued.push_back(m); });
  out.Put<uint64_t>(prequeued.size());
  for (Index i : prequeued) out.Put(i);

  out.Put(holders_);
  out.Put(admissions_);
  admitted_window_.Save(out);
  out.Put(counters_.admitted_total);
  out.Put(counters_.dropped_total);
  out.Put(counters_.released_total);
  std::vector<std::pair<std::string_view, Revoked>> revoked(revoked_.begin(), revoked_.end());
  std::sort(revoked.begin(), revoked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  out.Put<uint64_t>(revoked.size());
  for (const auto& [id, r] : revoked) {
    out.PutString(id);
    out.Put(r.admission);
    out.Put(r.until);
  }
  out.Put<uint64_t>(revoked_order_.size());
  for (const auto& [until, id] : revoked_order_) {
    out.Put(until);
    out.PutString(id);
  }
  out.Put<uint64_t>(clients_.size());
  for (const Client& c : clients_) {
    out.PutString(c.key);
    out.Put(c.places);
    out.Put(c.debt);
    out.Put(c.debt_at);
  }
  out.Put<uint64_t>(free_clients_.size());
  for (uint32_t c : free_clients_) out.Put(c);
  std::vector<DeadlineHeap::Entry> refills = client_refills_.entries();
  std::sort(refills.begin(), refills.end(),
            [](const auto& a, const auto& b) { return a.member < b.member; });
  out.Put<uint64_t>(refills.size());
  for (const auto& e : refills) {
    out.Put(e.member);
    out.Put(e.key);
  }
  out.Put(incarnation_);
  SaveLaunch(out);
  out.PutBool(own_.page.has_value());
  if (own_.page) out.PutString(*own_.page);
  out.Put(notice_seq_);
  outflow_.Save(out);
  inflow_.Save(out);
  SaveOptional(out, own_.notify_at_position);
  out.Put(near_noted_);
  std::vector<Index> near;
  for (Index i = 0; i < slab_.size(); ++i) {
    if (slab_[i].near) near.push_back(i);
  }
  out.Put<uint64_t>(near.size());
  for (Index i : near) out.Put(i);
}

// Events, the draw and the random method's stream.
void Room::SaveLaunch(ByteWriter& out) const {
  out.Put<uint64_t>(events_.size());
  for (const RoomEvent& e : events_) SaveRoomEvent(out, e);
  out.PutBool(draw_.has_value());
  if (draw_) {
    out.PutString(draw_->event);
    out.PutBool(draw_->shuffle);
    out.Put(draw_->at);
    out.Put<uint64_t>(draw_->published);
    out.Put<uint64_t>(draw_->order.size());
    for (Index i : draw_->order) out.Put(i);
    out.PutBool(draw_->fy.has_value());
    if (draw_->fy) draw_->fy->Save(out);
  }
  out.Put<uint64_t>(free_after_draw_.size());
  for (Index i : free_after_draw_) out.Put(i);
  SaveSeed(out, seed_);
  out.Put<uint64_t>(picks_ ? picks_->words_used() : picks_used_);
  std::vector<RoomPass> passes = Passes();
  out.Put<uint64_t>(passes.size());
  for (const RoomPass& p : passes) {
    out.PutString(p.id);
    out.PutString(p.digest);
    out.Put(static_cast<uint8_t>(p.kind));
    out.Put(p.uses);
    out.Put(p.uses_left);
    out.PutBool(p.expires_at.has_value());
    out.Put(p.expires_at.value_or(0));
    out.Put(p.created_at);
  }
  out.Put(counters_.passes_used);
}

bool Room::Restore(ByteReader& in) {
  uint32_t format = in.Get<uint32_t>();
  if (format != kRoomFormat && format != kRoomFormatV2 && format != kRoomFormatV1) return false;
  Room& r = *this;
  r.own_.capacity = in.Get<int64_t>();
  r.own_.grace_ms = in.Get<int64_t>();
  r.own_.checkin_timeout_ms = in.Get<int64_t>();
  r.own_.idle_timeout_ms = LoadOptional(in);
  r.own_.admit_per_minute = LoadOptional(in);
  r.own_.paused = in.GetBool();
  r.own_.target_url.reset();
  if (in.GetBool()) r.own_.target_url = in.GetString();
  r.own_.joins_per_minute_per_client = LoadOptional(in);
  r.own_.places_per_client = LoadOptional(in);
  r.own_.challenge_difficulty = LoadOptional(in);
  r.own_.gate.reset();
  if (in.GetBool()) r.own_.gate = in.GetString();
  auto method = in.Get<uint8_t>();
  if (method > static_cast<uint8_t>(QueueingMethod::kQueueAll)) in.Fail();
  r.own_.queueing_method = static_cast<QueueingMethod>(method);
  r.revocation_ttl_ms_ = in.Get<int64_t>();
  r.now_ = in.Get<int64_t>();
  if (in.failed() || !InRange(r.own_) || r.now_ < 0 || r.now_ > kLatestTimeMs ||
      r.revocation_ttl_ms_ < 0 || r.revocation_ttl_ms_ > kMaxDurationMs) {
    return false;
  }

  uint64_t n = in.GetCount(4 + 8 * 3 + 2);
  r.slab_.resize(n);
  for (Session& s : r.slab_) {
    std::string_view id = in.GetView();
    if (id.size() > SessionId::kMaxBytes) in.Fail();
    s.id.Assign(id.substr(0, SessionId::kMaxBytes));
    s.last_seen = in.Get<int64_t>();
    s.since = in.Get<int64_t>();
    s.admission = in.Get<uint64_t>();
    s.status = in.Get<SessionStatus>();
    s.claimed = in.GetBool();
    s.drawn = in.GetBool();
    s.front = in.GetBool();
    s.client = in.Get<uint32_t>();
    if (s.front && s.status != SessionStatus::kWaiting) in.Fail();
    if (s.status > SessionStatus::kPrequeue) in.Fail();
    if (s.drawn && s.status != SessionStatus::kPrequeue) in.Fail();
    // A free slot keeps nothing (Free).
    if (s.status == SessionStatus::kGone) {
      if (!s.id.view().empty()) in.Fail();
      s = Session{};
      s.status = SessionStatus::kGone;
    }
  }
  uint64_t free_count = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < free_count; ++k) {
    Index i = in.Get<Index>();
    if (i >= n || r.slab_[i].status != SessionStatus::kGone) in.Fail();
    r.free_.push_back(i);
  }
  if (in.failed()) return false;
  size_t live = 0;
  for (const Session& s : r.slab_) live += s.status != SessionStatus::kGone;
  r.index_.reserve(live);  // once: no growth while the sessions go in
  for (Index i = 0; i < n; ++i) {
    if (r.slab_[i].status != SessionStatus::kGone) r.index_.insert(i);
  }
  uint64_t heap_count = in.GetCount(sizeof(Index) + 8);
  for (uint64_t k = 0; k < heap_count && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    uint64_t key = in.Get<uint64_t>();
    if (i >= n || r.deadlines_.Contains(i)) {
      in.Fail();
    } else {
      r.deadlines_.Set(i, key);
    }
  }
  uint64_t waiting = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < waiting && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    if (i >= n || r.slab_[i].status != SessionStatus::kWaiting || r.slab_[i].front) {
      in.Fail();
    } else {
      r.slab_[i].ticket = r.line_.PushBack(i);
    }
  }
  uint64_t front = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < front && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    if (i >= n || !r.slab_[i].front || r.front_.size() >= front) {
      in.Fail();
    } else {
      r.slab_[i].ticket = r.front_.PushBack(i);
    }
  }
  uint64_t prequeued = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < prequeued && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    if (i >= n || r.slab_[i].status != SessionStatus::kPrequeue || r.slab_[i].drawn) {
      in.Fail();
    } else {
      r.slab_[i].ticket = r.prequeue_.PushBack(i);
    }
  }
  r.holders_ = in.Get<int64_t>();
  r.admissions_ = in.Get<uint64_t>();
  r.admitted_window_.Load(in);
  if (format != kRoomFormat) MinuteWindow().Load(in);  // the freed slots' minute: not kept
  r.counters_.admitted_total = in.Get<int64_t>();
  r.counters_.dropped_total = in.Get<int64_t>();
  r.counters_.released_total = in.Get<int64_t>();
  uint64_t revoked = in.GetCount(4 + 16);
  for (uint64_t k = 0; k < revoked && !in.failed(); ++k) {
    std::string id = in.GetString();
    uint64_t admission = in.Get<uint64_t>();
    int64_t until = in.Get<int64_t>();
    r.revoked_[std::move(id)] = Revoked{admission, until};
  }
  uint64_t order = in.GetCount(8 + 4);
  for (uint64_t k = 0; k < order && !in.failed(); ++k) {
    int64_t until = in.Get<int64_t>();
    r.revoked_order_.emplace_back(until, in.GetString());
  }
  if (!RestoreClients(in)) return false;
  r.incarnation_ = in.Get<uint64_t>();
  if (!RestoreLaunch(in)) return false;
  r.own_.page.reset();
  if (format != kRoomFormatV1) {
    if (in.GetBool()) r.own_.page = in.GetString();
    r.notice_seq_ = in.Get<uint64_t>();
  }
  if (format == kRoomFormat) {
    r.outflow_.Load(in);
    r.inflow_.Load(in);
    r.own_.notify_at_position = LoadOptional(in);
    r.config_.notify_at_position = r.own_.notify_at_position;  // no event overrides it
    r.near_noted_ = in.Get<int64_t>();
    uint64_t near = in.GetCount(sizeof(Index));
    for (uint64_t k = 0; k < near && !in.failed(); ++k) {
      Index i = in.Get<Index>();
      if (i >= n || r.slab_[i].status == SessionStatus::kGone) {
        in.Fail();
      } else {
        r.slab_[i].near = true;
      }
    }
    if (r.near_noted_ < 0 || r.near_noted_ > r.waiting()) return false;
  }
  if (!InRange(r.own_)) return false;
  for (Index i = 0; i < n && !in.failed(); ++i) {
    const Session& s = r.slab_[i];
    if (s.status != SessionStatus::kActive && s.status != SessionStatus::kGrace) continue;
    // Admissions are numbered from 1 by ++admissions_: a holder numbered past the counter would
    // share its number with the next one admitted.
    if (s.admission == 0 || s.admission > r.admissions_) return false;
    if (!r.held_.emplace(s.admission, i).second) return false;  // two holders of one admission
  }
  return !in.failed() && r.line_.size() == waiting && r.front_.size() == front &&
         r.prequeue_.size() == prequeued;
}

bool Room::RestoreLaunch(ByteReader& in) {
  const size_t n = slab_.size();
  uint64_t events = in.GetCount(4);
  if (events > kMaxEventsPerRoom) return false;
  for (uint64_t k = 0; k < events && !in.failed(); ++k) events_.push_back(LoadRoomEvent(in));
  if (in.GetBool()) {
    Draw d;
    d.event = in.GetString();
    d.shuffle = in.GetBool();
    d.at = in.Get<int64_t>();
    d.published = in.Get<uint64_t>();
    uint64_t order = in.GetCount(sizeof(Index));
    d.order.reserve(order);
    for (uint64_t k = 0; k < order && !in.failed(); ++k) {
      Index i = in.Get<Index>();
      if (i >= n) in.Fail();
      d.order.push_back(i);
    }
    if (in.GetBool()) {
      d.fy = FisherYates::Restore(in);
      if (!d.fy || !d.shuffle || !d.order.empty()) return false;
      for (uint32_t i : d.fy->order()) {
        if (i >= n) return false;
      }
    }
    size_t total = d.fy ? d.fy->size() : d.order.size();
    if (d.published > total || (d.fy && d.published > d.fy->done())) return false;
    draw_ = std::move(d);
  }
  uint64_t deferred = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < deferred && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    if (i >= n || slab_[i].status != SessionStatus::kGone || !draw_) return false;
    free_after_draw_.push_back(i);
  }
  seed_ = LoadSeed(in);
  picks_used_ = in.Get<uint64_t>();
  uint64_t passes = in.GetCount(4 + 4 + 1 + 8 * 4 + 1);
  if (passes > kMaxPassesPerRoom) return false;
  for (uint64_t k = 0; k < passes && !in.failed(); ++k) {
    RoomPass p;
    p.id = in.GetString();
    p.digest = in.GetString();
    auto kind = in.Get<uint8_t>();
    p.kind = static_cast<PassKind>(kind);
    p.uses = in.Get<int64_t>();
    p.uses_left = in.Get<int64_t>();
    bool expires = in.GetBool();
    int64_t at = in.Get<int64_t>();
    if (expires) p.expires_at = at;
    p.created_at = in.Get<int64_t>();
    if (kind > static_cast<uint8_t>(PassKind::kFront) || p.digest.size() != kPassDigestBytes ||
        p.uses < 1 || p.uses > kMaxPassUses || p.uses_left < 0 || p.uses_left > p.uses ||
        !IsTime(p.created_at) || (p.expires_at && !IsTime(*p.expires_at))) {
      return false;
    }
    std::string id = p.id;
    if (!passes_.emplace(std::move(id), std::move(p)).second) return false;
  }
  counters_.passes_used = in.Get<int64_t>();
  if (in.failed()) return false;
  // A drawn session is one the draw has not published yet.
  for (const Session& s : slab_) {
    if (s.drawn && !draw_) return false;
  }
  ComputeNextBoundary();
  config_ = EffectiveConfig();
  return true;
}

// The client table, checked against the sessions: every place a live session counts is in its
// client's count, and only live entries are indexed.
bool Room::RestoreClients(ByteReader& in) {
  uint64_t n = in.GetCount(4 + 8 * 3);
  if (n >= kNoClient) in.Fail();
  clients_.resize(in.failed() ? 0 : n);
  for (Client& c : clients_) {
    c.key = in.GetString();
    c.places = in.Get<int64_t>();
    c.debt = in.Get<int64_t>();
    c.debt_at = in.Get<int64_t>();
    // Held to what the rules can write: a bucket's worth of debt, times the engine accepts.
    if (c.debt < 0 || c.debt > kTokenUnits * kMaxJoinsPerMinutePerClient || c.debt_at < 0 ||
        c.debt_at > kLatestTimeMs) {
      in.Fail();
    }
  }
  std::vector<int64_t> places(clients_.size(), 0);
  for (const Session& s : slab_) {
    if (s.client == kNoClient) continue;
    if (s.client >= clients_.size() || s.status == SessionStatus::kGone) return false;
    ++places[s.client];
  }
  uint64_t free_count = in.GetCount(sizeof(uint32_t));
  for (uint64_t k = 0; k < free_count && !in.failed(); ++k) {
    uint32_t c = in.Get<uint32_t>();
    if (c >= clients_.size() || !clients_[c].key.empty()) return false;
    free_clients_.push_back(c);
  }
  if (in.failed()) return false;
  for (uint32_t c = 0; c < clients_.size(); ++c) {
    if (clients_[c].places != places[c]) return false;
    if (!clients_[c].key.empty() && !client_index_.insert(c)) return false;
  }
  if (client_index_.size() + free_clients_.size() != clients_.size()) return false;
  uint64_t refills = in.GetCount(sizeof(uint32_t) + 8);
  for (uint64_t k = 0; k < refills && !in.failed(); ++k) {
    uint32_t c = in.Get<uint32_t>();
    uint64_t key = in.Get<uint64_t>();
    if (c >= clients_.size() || clients_[c].key.empty() || clients_[c].places != 0 ||
        client_refills_.Contains(c)) {
      return false;
    }
    client_refills_.Set(c, key);
  }
  return !in.failed();
}

}  // namespace anteroom::core
