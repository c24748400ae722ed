#include "store/memory/memory_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/base64url.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "store/memory/change_record.h"
#include "store/memory/durable_answer.h"
#include "store/memory/memory_slots.h"

namespace anteroom::store {

namespace {
constexpr int64_t kMaxTimerSleepMs = 1000;
}

thread_local std::string MemoryBackend::scratch_;

MemoryBackend::MemoryBackend(const Clock& clock, MemoryBackendOptions options)
    : clock_(clock),
      options_(std::move(options)),
      events_(options_.events, clock_.NowMs()),
      lease_key_(options_.lease_secret) {
  if (options_.run_timer) timer_ = std::thread([this] { TimerLoop(); });
}

MemoryBackend::~MemoryBackend() { StopTimer(); }

void MemoryBackend::StopTimer() {
  {
    std::lock_guard lock(schedule_mu_);
    stopping_ = true;
  }
  schedule_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

core::RoomInfo MemoryBackend::Info(const RoomSlot& slot) {
  core::RoomInfo info;
  info.room = slot.name;
  info.config = slot.room.config();
  info.effective = slot.room.effective();
  info.event = slot.room.open_event();
  info.phase = slot.room.Phase();
  info.prequeued = slot.room.prequeued();
  info.active = slot.room.holders();
  info.waiting = slot.room.waiting();
  info.counters = slot.room.counters();
  return info;
}

std::shared_ptr<MemoryBackend::RoomSlot> MemoryBackend::MakeRoomSlot(const std::string& name,
                                                                     const core::RoomConfig& config,
                                                                     int64_t now) const {
  auto slot = std::make_shared<RoomSlot>(name, config, options_.token_ttl_ms, now,
                                         options_.max_clients_per_room);
  slot->room.set_presence(LivePresence());
  slot->room.set_noting(!replaying_);
  return slot;
}

namespace {
// A room's notice as the lifecycle event every backend tells.
LifecycleEvent EventOf(const std::string& room, core::RoomNotice n) {
  LifecycleEvent e;
  e.type = core::ToWire(n.kind);
  e.at_ms = n.at;
  e.room = room;
  e.seq = n.seq;
  e.session = std::move(n.session);
  if (n.kind == core::NoticeKind::kPositionNear) e.position = n.position;
  if (n.kind == core::NoticeKind::kAdmitted) e.admission = n.admission;
  e.detail = std::move(n.detail);
  return e;
}
}  // namespace

void MemoryBackend::TellRoom(RoomSlot& slot, const core::RoomNotice& notice) {
  std::vector<LifecycleEvent> one;
  one.push_back(EventOf(slot.name, notice));
  events_.Append(std::move(one), clock_.NowMs());
}

void MemoryBackend::TellNotices(RoomSlot& slot) {
  std::vector<core::RoomNotice> notices = slot.room.TakeNotices();
  if (notices.empty()) return;
  std::vector<LifecycleEvent> events;
  events.reserve(notices.size());
  for (core::RoomNotice& n : notices) {
    if (n.kind == core::NoticeKind::kAdmitted) ObserveRoomWait(n.waited_ms);
    events.push_back(EventOf(slot.name, std::move(n)));
  }
  events_.Append(std::move(events), clock_.NowMs());
}

void MemoryBackend::ReadEvents(std::optional<EventId> after, size_t max,
                               Completion<EventRead> done) {
  done(OpResult<EventRead>(events_.ReadAfter(after, max)));
}

void MemoryBackend::WatchEvents(std::function<void()> fn) { events_.Watch(std::move(fn)); }

void MemoryBackend::Schedule(const std::shared_ptr<Slot>& slot) {
  int64_t next = slot->NextDeadline();
  if (next >= slot->scheduled) return;
  slot->scheduled = next;
  bool earliest;
  {
    std::lock_guard lock(schedule_mu_);
    earliest = schedule_.empty() || next < schedule_.top().when;
    schedule_.push({next, slot});
  }
  if (earliest) schedule_cv_.notify_one();
}

std::optional<std::string> MemoryBackend::Refusal(Access access) const {
  ChangeSink* journal = journal_.load(std::memory_order_acquire);
  if (access == Access::kRead || journal == nullptr || journal->Writable()) return std::nullopt;
  return wire::ChangesRefused(journal->Problem());
}

void MemoryBackend::CheckHealth(Completion<HealthReport> done) {
  std::optional<std::string> refusal = Refusal(Access::kChange);
  done(HealthReport{.changes_ok = !refusal, .problem = refusal.value_or("")});
}

void MemoryBackend::Log(Slot& slot, const std::string& record) {
  slot.last_lsn = journal_.load(std::memory_order_relaxed)->Append(record);
}

core::Room::Presence MemoryBackend::LivePresence() const {
  if (Logging()) return core::Room::Presence::kReported;
  return replaying_ ? core::Room::Presence::kReplayed : core::Room::Presence::kTimed;
}

void MemoryBackend::LogSeenExpiries(RoomSlot& slot) {
  const auto& expiries = slot.room.seen_expiries();
  if (expiries.empty()) return;
  if (Logging()) {
    SeenExpiredRecord record;
    record.expiries.reserve(expiries.size());
    for (const auto& e : expiries) record.expiries.push_back({e.when, e.session});
    LogChange(slot, expiries.back().when, record);
  }
  slot.room.ClearSeenExpiries();
}

core::DrawSeed MemoryBackend::NewDrawSeed() {
  core::DrawSeed seed;
  std::string bytes = RandomBytes(seed.size());
  std::copy(bytes.begin(), bytes.end(), seed.begin());
  return seed;
}

// A draw the time began gets its seed at once, logged after the expiries that came before it
// and before anything else changes: a replay advances to the same time and seeds the same draw.
// An empty draw is over at once, so the time may begin another: hence the loop.
void MemoryBackend::LogTimeEffects(RoomSlot& slot, int64_t now) {
  LogSeenExpiries(slot);
  while (slot.room.NeedsSeed()) {
    DrawSeedRecord record{.seed = NewDrawSeed()};
    slot.room.SeedDraw(record.seed);
    LogChange(slot, now, record);
    slot.room.Advance(now);
    LogSeenExpiries(slot);
  }
}

template <typename T, typename Fn>
void MemoryBackend::OnRoom(const std::string& name, Access access, Completion<T> done, Fn&& fn) {
  if (auto refusal = Refusal(access)) {
    return done(OpResult<T>(OpStatus::kUnavailable, std::move(*refusal)));
  }
  std::optional<OpResult<T>> result;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::shared_lock rooms_lock(rooms_mu_);
    auto it = rooms_.find(name);
    if (it == rooms_.end()) {
      result.emplace(OpStatus::kUnknownRoom, wire::UnknownRoom(name));
    } else {
      std::lock_guard room_lock(it->second->mu);
      int64_t now = clock_.NowMs();
      // Expiries the time brings go in the log before whatever fn changes.
      it->second->room.Advance(now);
      LogTimeEffects(*it->second, now);
      result.emplace(fn(*it->second, now));
      TellNotices(*it->second);
      Schedule(it->second);
      lsn = it->second->last_lsn;
    }
  }
  // outside every lock: completions may take their time
  Answer(lsn, access, std::move(done), std::move(*result), {});
}

void MemoryBackend::PutRoom(std::string room, core::RoomPatch patch,
                            Completion<core::RoomInfo> done) {
  if (auto refusal = Refusal(Access::kChange)) {
    return done(OpResult<core::RoomInfo>(OpStatus::kUnavailable, std::move(*refusal)));
  }
  std::optional<OpResult<core::RoomInfo>> result;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::unique_lock rooms_lock(rooms_mu_);
    int64_t now = clock_.NowMs();
    auto it = rooms_.find(room);
    std::shared_ptr<RoomSlot> slot;
    if (it != rooms_.end()) {
      slot = it->second;
    } else if (patch.capacity && options_.max_rooms != 0 && rooms_.size() >= options_.max_rooms) {
      result.emplace(OpStatus::kLimitReached, wire::TooManyRooms(options_.max_rooms));
    } else if (patch.capacity) {
      core::RoomConfig config;
      patch.ApplyTo(config);
      slot = MakeRoomSlot(room, config, now);
      slot->room.set_incarnation(NewIncarnation());
      slot->room.set_seed(NewDrawSeed());
      rooms_.emplace(room, slot);
    } else {
      result.emplace(OpStatus::kInvalidArgument, std::string(wire::kCapacityRequired));
    }
    if (slot) {
      std::lock_guard room_lock(slot->mu);
      if (it != rooms_.end()) {
        slot->room.Advance(now);
        LogTimeEffects(*slot, now);
        slot->room.Reconfigure(patch, now);
        Schedule(slot);
      } else {
        core::RoomNotice created;
        created.kind = core::NoticeKind::kCreated;
        created.seq = slot->room.notice_seq();
        created.at = now;
        TellRoom(*slot, created);
      }
      TellNotices(*slot);
      if (it == rooms_.end()) {
        LogChange(*slot, now,
                  CreateRoomRecord{.incarnation = slot->room.incarnation(),
                                   .seed = slot->room.seed(),
                                   .patch = patch});
      } else {
        LogChange(*slot, now, PutRoomRecord{.patch = patch});
      }
      result.emplace(Info(*slot));
      lsn = slot->last_lsn;
    }
  }
  Answer(lsn, Access::kChange, std::move(done), std::move(*result), {});
}

void MemoryBackend::GetRoom(std::string room, Completion<core::RoomInfo> done) {
  OnRoom<core::RoomInfo>(room, Access::kRead, std::move(done), [](RoomSlot& slot, int64_t now) {
    slot.room.Advance(now);
    return OpResult<core::RoomInfo>(Info(slot));
  });
}

void MemoryBackend::ListRooms(Completion<std::vector<core::RoomInfo>> done) {
  std::vector<core::RoomInfo> rooms;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::shared_lock rooms_lock(rooms_mu_);
    rooms.reserve(rooms_.size());
    for (auto& [name, slot] : rooms_) {
      std::lock_guard room_lock(slot->mu);
      int64_t now = clock_.NowMs();
      slot->room.Advance(now);
      LogTimeEffects(*slot, now);
      TellNotices(*slot);
      Schedule(slot);
      rooms.push_back(Info(*slot));
      lsn = std::max(lsn, slot->last_lsn);
    }
  }
  std::sort(rooms.begin(), rooms.end(),
            [](const auto& a, const auto& b) { return a.room < b.room; });
  Answer<std::vector<core::RoomInfo>>(lsn, Access::kRead, std::move(done), std::move(rooms), {});
}

void MemoryBackend::DeleteRoom(std::string room, Completion<core::RoomInfo> done) {
  if (auto refusal = Refusal(Access::kChange)) {
    return done(OpResult<core::RoomInfo>(OpStatus::kUnavailable, std::move(*refusal)));
  }
  std::optional<OpResult<core::RoomInfo>> result;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::unique_lock rooms_lock(rooms_mu_);
    auto it = rooms_.find(room);
    if (it == rooms_.end()) {
      result.emplace(OpStatus::kUnknownRoom, wire::UnknownRoom(room));
    } else {
      std::lock_guard room_lock(it->second->mu);
      int64_t now = clock_.NowMs();
      it->second->room.Advance(now);
      LogTimeEffects(*it->second, now);
      result.emplace(Info(*it->second));
      LogChange(*it->second, now, DeleteRoomRecord{});
      TellNotices(*it->second);
      TellRoom(*it->second, it->second->room.DeletionNotice(now));
      lsn = it->second->last_lsn;
    }
    if (it != rooms_.end()) rooms_.erase(it);  // the timer's weak_ptr lets go with it
  }
  Answer(lsn, Access::kChange, std::move(done), std::move(*result), {});
}

// A refused join changes nothing but time, and a check-in that only refreshes presence
// changes nothing a replay needs (core::Room::set_presence): only joins, claims and returns
// from grace are recorded, with the client when the room counts per client (replay then counts
// the join as it was counted here).
void MemoryBackend::Check(std::string room, std::string session, core::Arrival arrival,
                          Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(
      room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
        uint64_t changes = slot.room.checkin_changes();
        int64_t passes_used = slot.room.counters().passes_used;
        OpResult<core::SessionView> result = slot.room.Check(session, arrival, now);
        if (result.ok() && slot.room.checkin_changes() != changes) {
          bool tracked =
              !arrival.client.empty() && (slot.room.config().joins_per_minute_per_client ||
                                          slot.room.config().places_per_client);
          bool redeemed = slot.room.counters().passes_used != passes_used;
          LogChange(slot, now,
                    CheckRecord{.session = session,
                                .client = tracked ? std::string_view(arrival.client) : "",
                                .pass = redeemed ? core::PassIdOfCode(arrival.pass) : ""});
        }
        return result;
      });
}

// Touch, leave and evict change nothing but time when the session is unknown: only their
// successes are recorded; and a touch only when it brings a session back from grace (else it
// only refreshes presence, as a check-in).
template <typename Record, typename Apply>
OpResult<core::SessionView> MemoryBackend::SessionChange(RoomSlot& slot, int64_t now,
                                                         const Record& record, Apply&& apply) {
  uint64_t changes = slot.room.checkin_changes();
  OpResult<core::SessionView> result = apply();
  bool changed = !std::is_same_v<Record, TouchRecord> || slot.room.checkin_changes() != changes;
  if (result.ok() && changed) LogChange(slot, now, record);
  return result;
}

void MemoryBackend::Touch(std::string room, std::string session,
                          Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(room, Access::kChange, std::move(done),
                            [&](RoomSlot& slot, int64_t now) {
                              return SessionChange(slot, now, TouchRecord{.session = session},
                                                   [&] { return slot.room.Touch(session, now); });
                            });
}

void MemoryBackend::Leave(std::string room, std::string session, bool final,
                          Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(
      room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
        return SessionChange(slot, now, LeaveRecord{.session = session, .final = final},
                             [&] { return slot.room.Leave(session, final, now); });
      });
}

void MemoryBackend::EndSession(std::string room, std::string session,
                               Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(room, Access::kChange, std::move(done),
                            [&](RoomSlot& slot, int64_t now) {
                              return SessionChange(slot, now, EvictRecord{.session = session},
                                                   [&] { return slot.room.Evict(session, now); });
                            });
}

void MemoryBackend::IsRevoked(std::string room, std::string session, uint64_t admission,
                              Completion<bool> done) {
  OnRoom<bool>(room, Access::kRead, std::move(done), [&](RoomSlot& slot, int64_t now) {
    return OpResult<bool>(slot.room.IsRevoked(session, admission, now));
  });
}

void MemoryBackend::AdmissionHolder(std::string room, uint64_t incarnation, uint64_t admission,
                                    Completion<std::optional<std::string>> done) {
  OnRoom<std::optional<std::string>>(
      room, Access::kRead, std::move(done), [&](RoomSlot& slot, int64_t now) {
        if (slot.room.incarnation() != incarnation) {
          return OpResult<std::optional<std::string>>(std::nullopt);
        }
        return OpResult<std::optional<std::string>>(slot.room.AdmissionHolder(admission, now));
      });
}

void MemoryBackend::ReadLine(std::string room, uint64_t since, Completion<core::LineView> done) {
  OnRoom<core::LineView>(room, Access::kRead, std::move(done), [&](RoomSlot& slot, int64_t now) {
    return OpResult<core::LineView>(slot.room.ReadLine(since, now));
  });
}

void MemoryBackend::PutEvent(std::string room, std::string id, core::EventSpec spec,
                             Completion<core::RoomEvent> done) {
  OnRoom<core::RoomEvent>(room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
    OpResult<core::RoomEvent> put = slot.room.PutEvent(id, spec, now);
    if (!put.ok()) return put;
    LogChange(slot, now, PutEventRecord{.id = id, .spec = spec});
    // A time already reached takes effect now, logged after the change (Room::PutEvent).
    slot.room.Advance(now);
    LogTimeEffects(slot, now);
    for (const core::RoomEvent& e : slot.room.events()) {
      if (e.id == id) return OpResult<core::RoomEvent>(e);
    }
    return put;
  });
}

void MemoryBackend::ListEvents(std::string room, Completion<std::vector<core::RoomEvent>> done) {
  using Events = std::vector<core::RoomEvent>;
  OnRoom<Events>(room, Access::kRead, std::move(done),
                 [&](RoomSlot& slot, int64_t) { return OpResult<Events>(slot.room.events()); });
}

void MemoryBackend::DeleteEvent(std::string room, std::string id,
                                Completion<core::RoomEvent> done) {
  OnRoom<core::RoomEvent>(room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
    OpResult<core::RoomEvent> gone = slot.room.DeleteEvent(id, now);
    if (gone.ok()) {
      LogChange(slot, now, DeleteEventRecord{.id = id});
      LogTimeEffects(slot, now);
    }
    return gone;
  });
}

// Each code is "<id>.<secret>": a short random id, and 128 random bits that only the answer
// holds (the room keeps their digest).
void MemoryBackend::MintPasses(std::string room, core::PassMint mint,
                               Completion<std::vector<core::MintedPass>> done) {
  using Minted = std::vector<core::MintedPass>;
  OnRoom<Minted>(room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
    Minted minted;
    AddPassesRecord record;
    for (int64_t k = 0; k < mint.count; ++k) {
      core::MintedPass m;
      m.pass.id = Base64UrlEncode(RandomBytes(9));
      m.code = m.pass.id + "." + NewRandomId();
      m.pass.digest = core::PassDigest(m.code);
      m.pass.kind = mint.kind;
      m.pass.uses = m.pass.uses_left = mint.uses;
      m.pass.expires_at = mint.expires_at;
      m.pass.created_at = now;
      record.passes.push_back(m.pass);
      minted.push_back(std::move(m));
    }
    OpResult<Done> added = slot.room.AddPasses(record.passes, now);
    if (!added.ok()) return OpResult<Minted>(added.status(), added.message());
    LogChange(slot, now, record);
    return OpResult<Minted>(std::move(minted));
  });
}

void MemoryBackend::ListPasses(std::string room, Completion<std::vector<core::RoomPass>> done) {
  using Passes = std::vector<core::RoomPass>;
  OnRoom<Passes>(room, Access::kRead, std::move(done),
                 [&](RoomSlot& slot, int64_t) { return OpResult<Passes>(slot.room.Passes()); });
}

void MemoryBackend::RevokePasses(std::string room, std::optional<std::string> id,
                                 Completion<int64_t> done) {
  OnRoom<int64_t>(room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
    std::optional<std::string_view> which;
    if (id) which = *id;
    OpResult<int64_t> revoked = slot.room.RevokePasses(which, now);
    if (revoked.ok()) LogChange(slot, now, RevokePassesRecord{.id = which});
    return revoked;
  });
}

void MemoryBackend::Present(std::string room, std::vector<std::string> sessions,
                            Completion<std::vector<core::SessionView>> done) {
  using Views = std::vector<core::SessionView>;
  OnRoom<Views>(room, Access::kChange, std::move(done), [&](RoomSlot& slot, int64_t now) {
    std::vector<uint32_t> changed;  // positions in `sessions` whose check-in changed more
    Views views = slot.room.Present(sessions, now, Logging() ? &changed : nullptr);
    if (!changed.empty()) {
      PresentRecord record;
      record.sessions.reserve(changed.size());
      for (uint32_t k : changed) record.sessions.push_back(sessions[k]);
      LogChange(slot, now, record);
    }
    return OpResult<Views>(std::move(views));
  });
}

// The timer's turn at a room: its deadlines, then a chunk of a draw (the lock is let go between
// chunks, so the room answers while a large pre-queue is published).
void MemoryBackend::PublishDraw(RoomSlot& slot, int64_t now) {
  LogTimeEffects(slot, now);
  if (!slot.room.Drawing()) return;
  slot.room.DrawStep(options_.draw_chunk, now);
  LogChange(slot, now, DrawStepRecord{.max = options_.draw_chunk});
  LogSeenExpiries(slot);
}

void MemoryBackend::RunDue() {
  std::vector<std::weak_ptr<Slot>> due;
  int64_t now = clock_.NowMs();
  {
    std::lock_guard lock(schedule_mu_);
    while (!schedule_.empty() && schedule_.top().when <= now) {
      due.push_back(schedule_.top().slot);
      schedule_.pop();
    }
  }
  Deferred after;
  uint64_t lsn = 0;
  for (auto& weak : due) {
    auto slot = weak.lock();
    if (!slot) continue;  // deleted
    std::shared_lock world(world_);
    {
      std::lock_guard slot_lock(slot->mu);
      int64_t slot_now = clock_.NowMs();
      slot->RunDue(slot_now, after);
      if (auto* room = dynamic_cast<RoomSlot*>(slot.get())) {
        PublishDraw(*room, slot_now);
        TellNotices(*room);
      } else if (auto* queue = dynamic_cast<QueueSlot*>(slot.get())) {
        TellQueue(*queue);
      }
      slot->scheduled = INT64_MAX;  // stale entries only cost a no-op pass
      Schedule(slot);
      lsn = std::max(lsn, slot->last_lsn);
    }
    // A long poll's name whose last waiter timed out, a worker that expired: forgotten.
    if (auto queue = std::dynamic_pointer_cast<QueueSlot>(slot)) DropIfEmpty(queue);
  }
  if (after.empty()) return;
  Answer<Done>(
      lsn, Access::kChange, [](OpResult<Done>) {}, Done{}, std::move(after));
}

void MemoryBackend::TimerLoop() {
  std::unique_lock lock(schedule_mu_);
  while (!stopping_) {
    int64_t now = clock_.NowMs();
    int64_t wait_ms = kMaxTimerSleepMs;
    if (!schedule_.empty()) wait_ms = std::clamp<int64_t>(schedule_.top().when - now, 0, wait_ms);
    if (wait_ms == 0) {
      lock.unlock();
      RunDue();
      lock.lock();
      continue;
    }
    schedule_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
  }
}

}  // namespace anteroom::store
