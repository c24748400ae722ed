// Replay of the log: each record decoded into its type (change_record.h), then applied through
// the same core call that made it. A record that does not decode, or whose values the HTTP layer
// would never have passed, changes nothing and stops recovery as damage.
#include <fmt/format.h>

#include "common/names.h"
#include "common/wire_errors.h"
#include "store/memory/memory_slots.h"

namespace anteroom::store {

namespace {
OpResult<Done> Diverged(std::string what) {
  return {OpStatus::kInternal, "change does not apply: " + std::move(what)};
}

// Out of these ranges the rules' deadline arithmetic could overflow.
bool IsDuration(int64_t ms) { return ms >= 0 && ms <= core::kMaxDurationMs; }
bool IsTime(int64_t ms) { return ms >= 0 && ms <= core::kLatestTimeMs; }
}  // namespace

// One record's change, applied to the backend it is replayed into. Apply has one overload per
// record type; each checks what the type alone cannot (ranges, existence) before changing state.
class ChangeReplayer {
 public:
  ChangeReplayer(MemoryBackend& backend, const ChangeHead& head)
      : b_(backend), now_(head.now_ms), name_(head.name) {}

  template <typename Record>
  OpResult<Done> DecodeAndApply(ByteReader& r) {
    Record record;
    if (!record.Decode(r) || !r.done()) {
      return Diverged(
          fmt::format("change record of kind {} does not decode", static_cast<int>(Record::kKind)));
    }
    return Apply(record);
  }

 private:
  // ---- rooms

  OpResult<Done> Apply(const CreateRoomRecord& c) {
    if (!core::InRange(c.patch) || !c.patch.capacity) return Diverged("room patch out of range");
    if (b_.rooms_.contains(name_)) return Diverged("room '" + name_ + "' created twice");
    core::RoomConfig config;
    c.patch.ApplyTo(config);
    auto slot = b_.MakeRoomSlot(name_, config, now_);
    slot->room.set_incarnation(c.incarnation);
    slot->room.set_seed(c.seed);
    b_.rooms_[name_] = std::move(slot);
    return Done{};
  }

  OpResult<Done> Apply(const PutRoomRecord& c) {
    if (!core::InRange(c.patch)) return Diverged("room patch out of range");
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged("room '" + name_ + "' changed before it was created");
    room->Reconfigure(c.patch, now_);
    return Done{};
  }

  OpResult<Done> Apply(const DeleteRoomRecord&) {
    if (b_.rooms_.erase(name_) == 0) return Diverged(wire::UnknownRoom(name_));
    return Done{};
  }

  OpResult<Done> Apply(const CheckRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    if (c.pass.empty()) {
      room->CheckRecorded(c.session, c.client, now_);
      return Done{};
    }
    auto redeemed = room->RedeemRecorded(c.session, c.client, c.pass, now_);
    if (!redeemed.ok()) return Diverged(redeemed.message());
    return Done{};
  }

  OpResult<Done> Apply(const AddPassesRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    std::vector<core::RoomPass> passes = c.passes;
    for (core::RoomPass& p : passes) {
      if (!IsValidName(p.id) || p.digest.size() != core::kPassDigestBytes || p.uses < 1 ||
          p.uses > core::kMaxPassUses || (p.expires_at && !IsTime(*p.expires_at))) {
        return Diverged("pass out of range");
      }
      p.created_at = now_;
    }
    auto added = room->AddPasses(std::move(passes), now_);
    if (!added.ok()) return Diverged(added.message());
    return Done{};
  }

  OpResult<Done> Apply(const RevokePassesRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    auto revoked = room->RevokePasses(c.id, now_);
    if (!revoked.ok()) return Diverged(revoked.message());
    return Done{};
  }

  OpResult<Done> Apply(const TouchRecord& c) {
    return OnSession(c.session, [&](core::Room& room) { return room.Touch(c.session, now_); });
  }
  OpResult<Done> Apply(const LeaveRecord& c) {
    return OnSession(c.session,
                     [&](core::Room& room) { return room.Leave(c.session, c.final, now_); });
  }
  OpResult<Done> Apply(const EvictRecord& c) {
    return OnSession(c.session, [&](core::Room& room) { return room.Evict(c.session, now_); });
  }

  OpResult<Done> Apply(const SeenExpiredRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    for (const auto& e : c.expiries) {
      if (!IsTime(e.when)) return Diverged("presence expiry time out of range");
    }
    // Outside a replay sessions expire by time: applying this one would expire them twice.
    if (room->presence() != core::Room::Presence::kReplayed) {
      return Diverged("presence expiry outside a replay");
    }
    for (const auto& e : c.expiries) {
      if (!room->ApplySeenExpiry(e.session, e.when)) {
        return Diverged("session '" + std::string(e.session) + "' cannot expire at " +
                        std::to_string(e.when));
      }
    }
    return Done{};
  }

  OpResult<Done> Apply(const PutEventRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    if (!IsValidName(c.id)) return Diverged("event id out of range");
    auto put = room->PutEvent(c.id, c.spec, now_);
    if (!put.ok()) return Diverged("event '" + std::string(c.id) + "': " + put.message());
    return Done{};
  }

  OpResult<Done> Apply(const DeleteEventRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    auto gone = room->DeleteEvent(c.id, now_);
    if (!gone.ok()) return Diverged(gone.message());
    return Done{};
  }

  // The seed goes to the draw the room's time began: advanced to the record's time first.
  OpResult<Done> Apply(const DrawSeedRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    room->Advance(now_);
    if (!room->NeedsSeed()) return Diverged("a draw's seed, and no draw waits for one");
    room->SeedDraw(c.seed);
    return Done{};
  }

  OpResult<Done> Apply(const DrawStepRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    room->Advance(now_);
    if (!room->Drawing() || c.max == 0) return Diverged("a chunk of a draw, and no draw is on");
    room->DrawStep(static_cast<size_t>(c.max), now_);
    return Done{};
  }

  OpResult<Done> Apply(const PresentRecord& c) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    std::vector<std::string> sessions(c.sessions.begin(), c.sessions.end());
    room->Present(sessions, now_);
    return Done{};
  }

  // ---- queues

  OpResult<Done> Apply(const PushRecord& c) {
    for (const auto& job : c.jobs) {
      if (!IsDuration(job.delay_ms) || job.max_attempts < 1 ||
          job.max_attempts > core::kMaxMaxAttempts) {
        return OutOfRange(c);
      }
    }
    MemoryBackend::QueueSlot& slot = QueueSlot();
    slot.listed = true;
    slot.queue.Push(c.decoded, now_);
    return Done{};
  }

  OpResult<Done> Apply(const FetchRecord& c) {
    if (!IsDuration(c.lease_ms)) return OutOfRange(c);
    if (QueueSlot().queue.Fetch(c.worker, c.max, c.lease_ms, now_).empty()) {
      return Diverged("queue '" + name_ + "': a recorded fetch found no job");
    }
    return Done{};
  }

  OpResult<Done> Apply(const ReclaimRecord& c) {
    if (!IsDuration(c.lease_ms)) return OutOfRange(c);
    size_t taken_back = 0;
    QueueSlot().queue.Reclaim(c.worker, c.max, c.lease_ms, now_, taken_back);
    if (taken_back == 0) return Diverged("queue '" + name_ + "': a recorded reclaim found no job");
    return Done{};
  }

  OpResult<Done> Apply(const AckRecord& c) {
    core::Queue& q = QueueSlot().queue;
    size_t k = 0;
    return EachLease(c.acked, [&](core::LeaseRef ref) {
      std::string_view result = c.results.empty() ? std::string_view{} : c.results[k];
      ++k;
      return q.Ack(ref, now_, result);
    });
  }

  OpResult<Done> Apply(const CreateBatchRecord& c) {
    if (QueueSlot().queue.CreateBatch(c.id, c.spec, now_) != core::BatchOutcome::kOk) {
      return Diverged("queue '" + name_ + "': a recorded batch could not be made");
    }
    QueueSlot().listed = true;  // as CreateBatch marks it
    return Done{};
  }

  OpResult<Done> Apply(const SealBatchRecord& c) {
    if (QueueSlot().queue.SealBatch(c.id, now_) != core::BatchOutcome::kOk) {
      return Diverged("queue '" + name_ + "': a recorded seal found no batch");
    }
    return Done{};
  }

  OpResult<Done> Apply(const SetProgressRecord& c) {
    core::Queue& q = QueueSlot().queue;
    return Current(c.lease, q.SetProgress(c.lease, c.progress, now_));
  }

  OpResult<Done> Apply(const AppendJobLogRecord& c) {
    core::Queue& q = QueueSlot().queue;
    std::vector<std::string> lines(c.lines.begin(), c.lines.end());
    return Current(c.lease, q.AppendLog(c.lease, lines, now_));
  }

  OpResult<Done> Apply(const NackRecord& c) {
    if (c.delay_ms && !IsDuration(*c.delay_ms)) return OutOfRange(c);
    core::Queue& q = QueueSlot().queue;
    std::string error(c.error);
    return EachLease(c.nacked,
                     [&](core::LeaseRef ref) { return q.Nack(ref, c.delay_ms, error, now_); });
  }

  OpResult<Done> Apply(const SnoozeRecord& c) {
    if (!IsDuration(c.delay_ms)) return OutOfRange(c);
    core::Queue& q = QueueSlot().queue;
    return EachLease(c.snoozed,
                     [&](core::LeaseRef ref) { return q.Snooze(ref, c.delay_ms, now_); });
  }

  OpResult<Done> Apply(const SetQueueSettingsRecord& c) {
    MemoryBackend::QueueSlot& slot = QueueSlot();
    slot.queue.Configure(c.settings, now_);
    slot.listed = true;  // as SetQueueSettings marks it
    return Done{};
  }

  OpResult<Done> Apply(const ExtendRecord& c) {
    if (!IsDuration(c.lease_ms)) return OutOfRange(c);
    core::Queue& q = QueueSlot().queue;
    return EachLease(c.extended,
                     [&](core::LeaseRef ref) { return q.Extend(ref, c.lease_ms, now_); });
  }

  OpResult<Done> Apply(const HeartbeatRecord& c) {
    if (!IsDuration(c.ttl_ms)) return OutOfRange(c);
    QueueSlot().queue.Heartbeat(c.worker, c.ttl_ms, now_);
    return Done{};
  }

  OpResult<Done> Apply(const ReleaseWorkerRecord& c) {
    QueueSlot().queue.ReleaseWorker(c.worker, now_);
    return Done{};
  }

  OpResult<Done> Apply(const RequeueDeadRecord& c) {
    std::optional<std::vector<core::JobId>> chosen;
    if (!c.all) chosen.emplace(c.ids.begin(), c.ids.end());
    if (QueueSlot().queue.RequeueDead(chosen, now_) == 0) {
      return Diverged("queue '" + name_ + "': nothing to requeue");
    }
    return Done{};
  }

  OpResult<Done> Apply(const CancelRecord& c) {
    if (QueueSlot().queue.Cancel(c.id, now_) != core::CancelOutcome::kCancelled) {
      return Diverged(fmt::format("queue '{}': job {} cannot be cancelled", name_, c.id));
    }
    return Done{};
  }

  OpResult<Done> Apply(const SetPausedRecord& c) {
    QueueSlot().queue.SetPaused(c.paused, now_);
    return Done{};
  }

  OpResult<Done> Apply(const SetQueueKeyRecord& c) {
    if (c.digest && c.digest->size() != kQueueKeyDigestBytes) return OutOfRange(c);
    MemoryBackend::QueueSlot& slot = QueueSlot();
    slot.key_digest = c.digest ? std::optional<std::string>(*c.digest) : std::nullopt;
    // As the live backend forgets a queue whose key went and that holds nothing else
    // (DropIfEmpty), so that replayed states equal live ones byte for byte.
    if (slot.HoldsNothing()) b_.queues_.erase(name_);
    return Done{};
  }

  // A schedule as recorded, its timing read again (a zone or cron text this build cannot read
  // is damage: it was read when the schedule was put).
  OpResult<Done> Place(const core::Schedule& schedule) {
    if (schedule.spec.queue != name_) return Diverged("a schedule recorded on another queue");
    auto rule = core::RuleOf(schedule.spec, schedule.state.created_at_ms);
    if (!rule.ok()) return Diverged("schedule '" + schedule.id + "': " + rule.message());
    MemoryBackend::QueueSlot& slot = QueueSlot();
    slot.listed = true;  // as PutSchedule marks it
    slot.schedules.insert_or_assign(schedule.id,
                                    MemoryBackend::QueueSlot::ScheduleEntry{schedule, *rule});
    slot.SchedulesChanged();
    return Done{};
  }

  OpResult<Done> Apply(const PutScheduleRecord& c) { return Place(c.schedule); }

  OpResult<Done> Apply(const DeleteScheduleRecord& c) {
    MemoryBackend::QueueSlot& slot = QueueSlot();
    auto it = slot.schedules.find(c.id);
    if (it == slot.schedules.end()) return Diverged("a deleted schedule was never put");
    slot.schedules.erase(it);
    slot.SchedulesChanged();
    return Done{};
  }

  OpResult<Done> Apply(const FireScheduleRecord& c) {
    MemoryBackend::QueueSlot& slot = QueueSlot();
    if (!slot.schedules.contains(c.schedule.id)) return Diverged("a fired schedule was never put");
    std::vector<core::JobSpec> jobs;
    for (int64_t t : c.runs) jobs.push_back(core::RunJob(c.schedule, t));
    slot.queue.Push(jobs, now_);
    return Place(c.schedule);
  }

  // ---- config entries

  OpResult<Done> Apply(const SetConfigRecord& c) {
    if (c.value && c.value->size() > kMaxConfigValueBytes) return OutOfRange(c);
    std::pair<std::string, std::string> key{std::string(c.kind), name_};
    if (c.value) {
      b_.config_->entries[key] = std::string(*c.value);
    } else if (b_.config_->entries.erase(key) == 0) {
      return Diverged("config entry '" + name_ + "' removed twice");
    }
    return Done{};
  }

  // ---- helpers

  core::Room* FindRoom() {
    auto it = b_.rooms_.find(name_);
    return it == b_.rooms_.end() ? nullptr : &it->second->room;
  }

  template <typename Change>
  OpResult<Done> OnSession(std::string_view session, Change&& change) {
    core::Room* room = FindRoom();
    if (room == nullptr) return Diverged(wire::UnknownRoom(name_));
    OpResult<core::SessionView> v = change(*room);
    if (!v.ok()) return Diverged("session '" + std::string(session) + "': " + v.message());
    return Done{};
  }

  // A queue's records replay onto it whether or not it exists yet: its first change makes it.
  MemoryBackend::QueueSlot& QueueSlot() {
    auto& slot = b_.queues_[name_];
    if (!slot) slot = std::make_shared<MemoryBackend::QueueSlot>(b_, name_, now_);
    return *slot;
  }

  template <typename Apply>
  OpResult<Done> EachLease(const LeaseList& list, Apply&& apply) {
    for (const auto& ref : list.leases) {
      if (auto r = Current(ref, apply(ref)); !r.ok()) return r;
    }
    return Done{};
  }
  // A recorded change to a lease found it current (it was, when recorded).
  OpResult<Done> Current(core::LeaseRef ref, core::LeaseOutcome outcome) {
    if (outcome == core::LeaseOutcome::kOk) return Done{};
    return Diverged(fmt::format("queue '{}': lease of job {} delivery {} is not current", name_,
                                ref.id, ref.delivery));
  }

  template <typename Record>
  static OpResult<Done> OutOfRange(const Record&) {
    return Diverged(
        fmt::format("queue change of kind {} out of range", static_cast<int>(Record::kKind)));
  }

  MemoryBackend& b_;
  int64_t now_;
  std::string name_;
};

OpResult<Done> MemoryBackend::Replay(std::string_view bytes) {
  ByteReader r(bytes);
  ChangeHead head;
  if (!DecodeHead(r, head)) return {OpStatus::kInternal, "change record too short"};
  if (!IsTime(head.now_ms)) {
    return {OpStatus::kInternal, fmt::format("change record time {} is out of range", head.now_ms)};
  }
  ChangeReplayer replay(*this, head);
  switch (head.kind) {
    case ChangeKind::kCreateRoom:
      return replay.DecodeAndApply<CreateRoomRecord>(r);
    case ChangeKind::kPutRoom:
      return replay.DecodeAndApply<PutRoomRecord>(r);
    case ChangeKind::kDeleteRoom:
      return replay.DecodeAndApply<DeleteRoomRecord>(r);
    case ChangeKind::kCheck:
      return replay.DecodeAndApply<CheckRecord>(r);
    case ChangeKind::kTouch:
      return replay.DecodeAndApply<TouchRecord>(r);
    case ChangeKind::kLeave:
      return replay.DecodeAndApply<LeaveRecord>(r);
    case ChangeKind::kEvict:
      return replay.DecodeAndApply<EvictRecord>(r);
    case ChangeKind::kSeenExpired:
      return replay.DecodeAndApply<SeenExpiredRecord>(r);
    case ChangeKind::kPresent:
      return replay.DecodeAndApply<PresentRecord>(r);
    case ChangeKind::kPutEvent:
      return replay.DecodeAndApply<PutEventRecord>(r);
    case ChangeKind::kDeleteEvent:
      return replay.DecodeAndApply<DeleteEventRecord>(r);
    case ChangeKind::kDrawSeed:
      return replay.DecodeAndApply<DrawSeedRecord>(r);
    case ChangeKind::kDrawStep:
      return replay.DecodeAndApply<DrawStepRecord>(r);
    case ChangeKind::kAddPasses:
      return replay.DecodeAndApply<AddPassesRecord>(r);
    case ChangeKind::kRevokePasses:
      return replay.DecodeAndApply<RevokePassesRecord>(r);
    case ChangeKind::kPush:
      return replay.DecodeAndApply<PushRecord>(r);
    case ChangeKind::kFetch:
      return replay.DecodeAndApply<FetchRecord>(r);
    case ChangeKind::kAck:
      return replay.DecodeAndApply<AckRecord>(r);
    case ChangeKind::kNack:
      return replay.DecodeAndApply<NackRecord>(r);
    case ChangeKind::kExtend:
      return replay.DecodeAndApply<ExtendRecord>(r);
    case ChangeKind::kHeartbeat:
      return replay.DecodeAndApply<HeartbeatRecord>(r);
    case ChangeKind::kReleaseWorker:
      return replay.DecodeAndApply<ReleaseWorkerRecord>(r);
    case ChangeKind::kRequeueDead:
      return replay.DecodeAndApply<RequeueDeadRecord>(r);
    case ChangeKind::kCancel:
      return replay.DecodeAndApply<CancelRecord>(r);
    case ChangeKind::kSetPaused:
      return replay.DecodeAndApply<SetPausedRecord>(r);
    case ChangeKind::kSetQueueKey:
      return replay.DecodeAndApply<SetQueueKeyRecord>(r);
    case ChangeKind::kReclaim:
      return replay.DecodeAndApply<ReclaimRecord>(r);
    case ChangeKind::kSetConfig:
      return replay.DecodeAndApply<SetConfigRecord>(r);
    case ChangeKind::kSnooze:
      return replay.DecodeAndApply<SnoozeRecord>(r);
    case ChangeKind::kSetQueueSettings:
      return replay.DecodeAndApply<SetQueueSettingsRecord>(r);
    case ChangeKind::kPutSchedule:
      return replay.DecodeAndApply<PutScheduleRecord>(r);
    case ChangeKind::kDeleteSchedule:
      return replay.DecodeAndApply<DeleteScheduleRecord>(r);
    case ChangeKind::kFireSchedule:
      return replay.DecodeAndApply<FireScheduleRecord>(r);
    case ChangeKind::kSetProgress:
      return replay.DecodeAndApply<SetProgressRecord>(r);
    case ChangeKind::kAppendJobLog:
      return replay.DecodeAndApply<AppendJobLogRecord>(r);
    case ChangeKind::kCreateBatch:
      return replay.DecodeAndApply<CreateBatchRecord>(r);
    case ChangeKind::kSealBatch:
      return replay.DecodeAndApply<SealBatchRecord>(r);
  }
  return Diverged(fmt::format("unknown change kind {}", static_cast<int>(head.kind)));
}

void MemoryBackend::StartReplay() {
  std::unique_lock world(world_);
  replaying_ = true;
  for (auto& [name, slot] : rooms_) slot->room.set_presence(LivePresence());
  for (auto& [name, slot] : queues_) slot->queue.set_noting(false);
}

}  // namespace anteroom::store
