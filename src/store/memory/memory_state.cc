// Durability hooks of the memory backend: snapshots of every room and queue, and the replay of
// change records (change_record.h) through the same core calls that made them.
#include <fmt/format.h>

#include "common/wire_errors.h"
#include "store/memory/memory_slots.h"

namespace anteroom::store {

namespace {
// The layout's version (SaveState below), written first. LoadState reads every version listed
// here, so a data directory written by an older anteroom still opens:
//   1: no queue keys (queues load without one).
//   2: adds, per queue after `listed`: opt-str key (u8 has | [str digest, 32 bytes]), the
//      queue's own key (Backend::SetQueueKey).
// To add one: bump kStateFormat, write the new field, read it only from that format on, and
// keep a test that an older state still loads (tests/unit/log_recovery_test.cc).
constexpr uint32_t kStateFormat = 2;

OpResult<Done> Diverged(std::string what) {
  return {OpStatus::kInternal, "change does not apply: " + std::move(what)};
}
}  // namespace

void MemoryBackend::AttachJournal(ChangeSink* journal) {
  std::unique_lock world(world_);
  journal_.store(journal, std::memory_order_release);
  for (auto& [name, slot] : rooms_) {
    std::lock_guard lock(slot->mu);
    slot->room.ClearSeenExpiries();  // older ones are not this journal's to log
    slot->room.set_presence(LivePresence());
  }
}

void MemoryBackend::ReplayPresenceFromLog(bool from_log) {
  std::unique_lock world(world_);
  replay_presence_from_log_ = from_log;
  for (auto& [name, slot] : rooms_) slot->room.set_presence(LivePresence());
}

void MemoryBackend::FinishRecovery() {
  std::unique_lock world(world_);
  replay_presence_from_log_ = false;
  int64_t now = clock_.NowMs();
  for (auto& [name, slot] : rooms_) {
    std::lock_guard lock(slot->mu);
    slot->room.Restart(now, LivePresence());
    LogSeenExpiries(*slot);  // a live backend's (tests); none while recovering
  }
}

// Layout: u32 format | u64 rooms, each (str name, Room) | u64 queues, each (str name, u8 listed,
// opt-str key, Queue). Room and Queue write their own versioned layouts (core/*_snapshot.cc).
// Sorted by name, so equal states write equal bytes (tests compare them).
void MemoryBackend::SaveState(ByteWriter& out) const {
  out.Put(kStateFormat);
  std::map<std::string_view, const RoomSlot*> rooms;
  for (const auto& [name, slot] : rooms_) rooms.emplace(name, slot.get());
  out.Put<uint64_t>(rooms.size());
  for (const auto& [name, slot] : rooms) {
    out.PutString(name);
    slot->room.Save(out);
  }
  std::map<std::string_view, const QueueSlot*> queues;
  for (const auto& [name, slot] : queues_) queues.emplace(name, slot.get());
  out.Put<uint64_t>(queues.size());
  for (const auto& [name, slot] : queues) {
    out.PutString(name);
    out.PutBool(slot->listed);
    PutOptionalString(out, slot->key_digest);
    slot->queue.Save(out);
  }
}

bool MemoryBackend::LoadState(ByteReader& in) {
  std::unique_lock world(world_);
  uint32_t format = in.Get<uint32_t>();
  if (format < 1 || format > kStateFormat) return false;
  rooms_.clear();
  queues_.clear();
  uint64_t rooms = in.GetCount(8);
  for (uint64_t k = 0; k < rooms && !in.failed(); ++k) {
    std::string name = in.GetString();
    auto slot = MakeRoomSlot(name, core::RoomConfig{}, 0);
    if (!slot->room.Restore(in)) return false;
    rooms_[name] = std::move(slot);
  }
  uint64_t queues = in.GetCount(8);
  for (uint64_t k = 0; k < queues && !in.failed(); ++k) {
    std::string name = in.GetString();
    auto slot = std::make_shared<QueueSlot>(*this, name, 0);
    slot->listed = in.GetBool();
    if (format >= 2) {
      slot->key_digest = GetOptionalString(in);
      if (slot->key_digest && slot->key_digest->size() != kQueueKeyDigestBytes) return false;
    }
    if (!slot->queue.Restore(in)) return false;
    queues_[name] = std::move(slot);
  }
  return in.done();
}

void MemoryBackend::ScheduleAll() {
  RecountQueues();
  std::shared_lock world(world_);
  for (auto& [name, slot] : rooms_) {
    std::lock_guard lock(slot->mu);
    slot->scheduled = INT64_MAX;
    Schedule(slot);
  }
  for (auto& [name, slot] : queues_) {
    std::lock_guard lock(slot->mu);
    slot->scheduled = INT64_MAX;
    Schedule(slot);
  }
}

MemoryBackend::Summary MemoryBackend::Summarize() {
  std::shared_lock world(world_);
  Summary s;
  s.rooms = rooms_.size();
  for (auto& [name, slot] : rooms_) {
    std::lock_guard lock(slot->mu);
    s.sessions += slot->room.sessions();
  }
  s.queues = queues_.size();
  for (auto& [name, slot] : queues_) {
    std::lock_guard lock(slot->mu);
    core::QueueStats st = slot->queue.Stats(INT64_MIN);
    s.jobs += static_cast<size_t>(st.ready + st.delayed + st.inflight + st.dead);
  }
  return s;
}

OpResult<Done> MemoryBackend::Replay(std::string_view record) {
  ByteReader r(record);
  auto kind = r.Get<ChangeKind>();
  int64_t now = r.Get<int64_t>();
  std::string name = r.GetString();
  if (r.failed()) return {OpStatus::kInternal, "change record too short"};
  if (now < 0 || now > core::kLatestTimeMs) {
    return {OpStatus::kInternal, fmt::format("change record time {} is out of range", now)};
  }
  OpResult<Done> result =
      IsRoomChange(kind) ? ReplayRoom(kind, now, name, r) : ReplayQueue(kind, now, name, r);
  if (result.ok() && !r.done()) {
    return {OpStatus::kInternal,
            fmt::format("change record of kind {} does not decode", static_cast<int>(kind))};
  }
  return result;
}

OpResult<Done> MemoryBackend::ReplayRoom(ChangeKind kind, int64_t now, const std::string& name,
                                         ByteReader& r) {
  auto it = rooms_.find(name);
  if (kind == ChangeKind::kCreateRoom || kind == ChangeKind::kCreateRoom2) {
    uint64_t incarnation = r.Get<uint64_t>();
    core::RoomPatch patch = GetRoomPatch(
        r, kind == ChangeKind::kCreateRoom ? ChangeKind::kPutRoom3 : ChangeKind::kPutRoom4);
    if (!r.done()) return Diverged("room patch does not decode");
    if (!core::InRange(patch) || !patch.capacity) return Diverged("room patch out of range");
    if (it != rooms_.end()) return Diverged("room '" + name + "' created twice");
    core::RoomConfig config;
    patch.ApplyTo(config);
    auto slot = MakeRoomSlot(name, config, now);
    slot->room.set_incarnation(incarnation);
    rooms_[name] = std::move(slot);
    return Done{};
  }
  if (kind == ChangeKind::kPutRoom || kind == ChangeKind::kPutRoom2 ||
      kind == ChangeKind::kPutRoom3 || kind == ChangeKind::kPutRoom4) {
    core::RoomPatch patch = GetRoomPatch(r, kind);
    if (!r.done()) return Diverged("room patch does not decode");
    if (!core::InRange(patch)) return Diverged("room patch out of range");
    if (it != rooms_.end()) {
      it->second->room.Reconfigure(patch, now);
    } else if (kind == ChangeKind::kPutRoom4) {
      return Diverged("room '" + name + "' changed before it was created");  // kCreateRoom2 does
    } else if (patch.capacity) {  // a creation in a log written before kCreateRoom
      core::RoomConfig config;
      patch.ApplyTo(config);
      rooms_[name] = MakeRoomSlot(name, config, now);
    } else {
      return Diverged("room '" + name + "' created without a capacity");
    }
    return Done{};
  }
  if (it == rooms_.end()) return Diverged(wire::UnknownRoom(name));
  core::Room& room = it->second->room;
  // Every body is decoded whole before it is applied: a record that does not decode changes
  // nothing.
  auto undecodable = [kind] {
    return Diverged(fmt::format("room change of kind {} does not decode", static_cast<int>(kind)));
  };
  switch (kind) {
    case ChangeKind::kDeleteRoom:
      if (!r.done()) return undecodable();
      rooms_.erase(it);
      return Done{};
    case ChangeKind::kCheck: {
      std::string_view session = r.GetView();
      if (!r.done()) return undecodable();
      room.Check(session, now);
      return Done{};
    }
    case ChangeKind::kCheck2: {
      std::string_view session = r.GetView();
      std::string_view client = r.GetView();
      if (!r.done()) return undecodable();
      room.CheckRecorded(session, client, now);
      return Done{};
    }
    case ChangeKind::kSeenExpired: {
      uint32_t n = r.Get<uint32_t>();
      std::vector<std::pair<int64_t, std::string_view>> expiries;
      for (uint32_t i = 0; i < n && !r.failed(); ++i) {
        int64_t when = r.Get<int64_t>();
        expiries.emplace_back(when, r.GetView());
        if (when < 0 || when > core::kLatestTimeMs) r.Fail();
      }
      if (!r.done()) return Diverged("presence expiry record does not decode");
      // In a log of format 1 (which has no such records) sessions expire by time: this one
      // would expire them twice.
      if (room.presence() != core::Room::Presence::kReplayed) {
        return Diverged("presence expiry in a log of format 1");
      }
      for (const auto& [when, session] : expiries) {
        if (!room.ApplySeenExpiry(session, when)) {
          return Diverged("session '" + std::string(session) + "' cannot expire at " +
                          std::to_string(when));
        }
      }
      return Done{};
    }
    case ChangeKind::kPresent: {
      uint32_t n = r.Get<uint32_t>();
      std::vector<std::string> sessions;
      for (uint32_t i = 0; i < n && !r.failed(); ++i) sessions.push_back(r.GetString());
      if (!r.done()) return Diverged("present record does not decode");
      room.Present(sessions, now);
      return Done{};
    }
    case ChangeKind::kTouch:
    case ChangeKind::kLeave:
    case ChangeKind::kEvict: {
      std::string session = r.GetString();
      bool final = kind == ChangeKind::kLeave && r.GetBool();
      if (!r.done()) return undecodable();
      OpResult<core::SessionView> v = kind == ChangeKind::kTouch   ? room.Touch(session, now)
                                      : kind == ChangeKind::kLeave ? room.Leave(session, final, now)
                                                                   : room.Evict(session, now);
      if (!v.ok()) return Diverged("session '" + session + "': " + v.message());
      return Done{};
    }
    default:
      return Diverged(fmt::format("unknown room change kind {}", static_cast<int>(kind)));
  }
}

OpResult<Done> MemoryBackend::ReplayQueue(ChangeKind kind, int64_t now, const std::string& name,
                                          ByteReader& r) {
  // Every body is decoded whole before it is applied: a record that does not decode changes
  // nothing (not even the queue's existence).
  auto undecodable = [kind] {
    return Diverged(fmt::format("queue change of kind {} does not decode", static_cast<int>(kind)));
  };
  // Values the HTTP layer would never have passed (so never logged) are damage: out of these
  // ranges the rules' deadline arithmetic could overflow.
  auto out_of_range = [kind] {
    return Diverged(fmt::format("queue change of kind {} out of range", static_cast<int>(kind)));
  };
  auto duration = [](int64_t ms) { return ms >= 0 && ms <= core::kMaxDurationMs; };
  auto slot_for = [&]() -> QueueSlot& {
    auto& slot = queues_[name];
    if (!slot) slot = std::make_shared<QueueSlot>(*this, name, now);
    return *slot;
  };
  auto each_ok = [&](const std::vector<core::LeaseRef>& refs, auto&& apply) -> OpResult<Done> {
    for (const auto& ref : refs) {
      if (apply(ref) != core::LeaseOutcome::kOk) {
        return Diverged(fmt::format("queue '{}': lease of job {} delivery {} is not current", name,
                                    ref.id, ref.delivery));
      }
    }
    return Done{};
  };
  switch (kind) {
    case ChangeKind::kPush: {
      auto jobs = GetJobs(r);
      if (!r.done()) return undecodable();
      for (const auto& job : jobs) {
        if (!duration(job.delay_ms) || job.max_attempts < 1 ||
            job.max_attempts > core::kMaxMaxAttempts) {
          return out_of_range();
        }
      }
      QueueSlot& slot = slot_for();
      slot.listed = true;
      slot.queue.Push(jobs, now);
      return Done{};
    }
    case ChangeKind::kFetch: {
      std::string worker = r.GetString();
      auto max = r.Get<uint64_t>();
      auto lease_ms = r.Get<int64_t>();
      if (!r.done()) return undecodable();
      if (!duration(lease_ms)) return out_of_range();
      if (slot_for().queue.Fetch(worker, max, lease_ms, now).empty()) {
        return Diverged("queue '" + name + "': a recorded fetch found no job");
      }
      return Done{};
    }
    case ChangeKind::kAck: {
      auto refs = GetLeases(r);
      if (!r.done()) return undecodable();
      core::Queue& q = slot_for().queue;
      return each_ok(refs, [&](core::LeaseRef ref) { return q.Ack(ref, now); });
    }
    case ChangeKind::kNack: {
      auto refs = GetLeases(r);
      auto delay = GetOptional(r);
      std::string error = r.GetString();
      if (!r.done()) return undecodable();
      if (delay && !duration(*delay)) return out_of_range();
      core::Queue& q = slot_for().queue;
      return each_ok(refs, [&](core::LeaseRef ref) { return q.Nack(ref, delay, error, now); });
    }
    case ChangeKind::kExtend: {
      auto refs = GetLeases(r);
      auto lease_ms = r.Get<int64_t>();
      if (!r.done()) return undecodable();
      if (!duration(lease_ms)) return out_of_range();
      core::Queue& q = slot_for().queue;
      return each_ok(refs, [&](core::LeaseRef ref) { return q.Extend(ref, lease_ms, now); });
    }
    case ChangeKind::kHeartbeat: {
      std::string worker = r.GetString();
      auto ttl_ms = r.Get<int64_t>();
      if (!r.done()) return undecodable();
      if (!duration(ttl_ms)) return out_of_range();
      slot_for().queue.Heartbeat(worker, ttl_ms, now);
      return Done{};
    }
    case ChangeKind::kReleaseWorker: {
      std::string_view worker = r.GetView();
      if (!r.done()) return undecodable();
      slot_for().queue.ReleaseWorker(worker, now);
      return Done{};
    }
    case ChangeKind::kRequeueDead: {
      bool all = r.GetBool();
      uint32_t n = r.Get<uint32_t>();
      if (n > r.remaining() / 8) return Diverged("requeue list does not decode");
      std::vector<core::JobId> ids(n);
      for (auto& id : ids) id = r.Get<core::JobId>();
      if (!r.done()) return undecodable();
      std::optional<std::vector<core::JobId>> chosen;
      if (!all) chosen = std::move(ids);
      if (slot_for().queue.RequeueDead(chosen, now) == 0)
        return Diverged("queue '" + name + "': nothing to requeue");
      return Done{};
    }
    case ChangeKind::kCancel: {
      auto id = r.Get<core::JobId>();
      if (!r.done()) return undecodable();
      if (slot_for().queue.Cancel(id, now) != core::CancelOutcome::kCancelled) {
        return Diverged(fmt::format("queue '{}': job {} cannot be cancelled", name, id));
      }
      return Done{};
    }
    case ChangeKind::kSetPaused: {
      bool paused = r.GetBool();
      if (!r.done()) return undecodable();
      slot_for().queue.SetPaused(paused, now);
      return Done{};
    }
    case ChangeKind::kSetQueueKey: {
      std::optional<std::string> digest = GetOptionalString(r);
      if (!r.done()) return undecodable();
      if (digest && digest->size() != kQueueKeyDigestBytes) return out_of_range();
      QueueSlot& slot = slot_for();
      slot.key_digest = std::move(digest);
      // As the live backend forgets a queue whose key went and that holds nothing else
      // (DropIfEmpty), so that replayed states equal live ones byte for byte.
      if (slot.HoldsNothing()) queues_.erase(name);
      return Done{};
    }
    default:
      return Diverged(fmt::format("unknown queue change kind {}", static_cast<int>(kind)));
  }
}

}  // namespace anteroom::store
