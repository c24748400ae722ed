// Durability hooks of the memory backend: snapshots of every room and queue, the journal's
// attachment, and the end of a recovery (the replay of the log is memory_replay.cc).
#include "store/memory/memory_slots.h"

namespace anteroom::store {

namespace {
// The layout's version, written first: that of the data directory's format
// (store/log/record_format.h). Any other is refused.
constexpr uint32_t kStateFormat = 1;
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

void MemoryBackend::FinishRecovery() {
  std::unique_lock world(world_);
  replaying_ = false;
  int64_t now = clock_.NowMs();
  for (auto& [name, slot] : rooms_) {
    std::lock_guard lock(slot->mu);
    slot->room.set_noting(true);
    slot->room.Restart(now, LivePresence());
    TellNotices(*slot);
    LogSeenExpiries(*slot);  // a live backend's (tests); none while recovering
  }
  for (auto& [name, slot] : queues_) {
    std::lock_guard lock(slot->mu);
    slot->queue.set_noting(true);
  }
}

// Layout: u32 format | u64 rooms, each (str name, Room) | u64 queues, each (str name, u8 listed,
// opt-str key, Queue) | u64 config entries, each (str kind, str name, str value) | u64
// schedules, each core::SaveSchedule. Room and Queue
// write their own versioned layouts (core/*_snapshot.cc). Data format 4 and 5 end after the
// queues (no config entries then), 6 and 7 after the config entries (no schedules then).
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
  out.Put<uint64_t>(config_->entries.size());
  for (const auto& [key, value] : config_->entries) {
    out.PutString(key.first);
    out.PutString(key.second);
    out.PutString(value);
  }
  std::map<std::string_view, const core::Schedule*> schedules;
  for (const auto& [name, slot] : queues_) {
    for (const auto& [id, e] : slot->schedules) schedules.emplace(id, &e.schedule);
  }
  out.Put<uint64_t>(schedules.size());
  for (const auto& [id, schedule] : schedules) core::SaveSchedule(out, *schedule);
}

bool MemoryBackend::LoadState(ByteReader& in) {
  std::unique_lock world(world_);
  uint32_t format = in.Get<uint32_t>();
  if (format != kStateFormat) return false;
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
    slot->key_digest = GetOptionalString(in);
    if (slot->key_digest && slot->key_digest->size() != kQueueKeyDigestBytes) return false;
    if (!slot->queue.Restore(in)) return false;
    queues_[name] = std::move(slot);
  }
  config_->entries.clear();
  if (in.done()) return true;  // data format 4 or 5
  uint64_t entries = in.GetCount(12);
  for (uint64_t k = 0; k < entries && !in.failed(); ++k) {
    std::string kind = in.GetString();
    std::string name = in.GetString();
    std::string value = in.GetString();
    if (value.size() > kMaxConfigValueBytes) return false;
    config_->entries[{std::move(kind), std::move(name)}] = std::move(value);
  }
  if (in.done()) return true;  // data format 6 or 7
  uint64_t schedules = in.GetCount(100);
  for (uint64_t k = 0; k < schedules && !in.failed(); ++k) {
    core::Schedule schedule;
    if (!core::LoadSchedule(in, schedule)) return false;
    auto rule = core::RuleOf(schedule.spec, schedule.state.created_at_ms);
    auto queue = queues_.find(schedule.spec.queue);
    if (!rule.ok() || queue == queues_.end()) return false;
    QueueSlot& slot = *queue->second;
    std::string id = schedule.id;
    slot.schedules.insert_or_assign(std::move(id), QueueSlot::ScheduleEntry{schedule, *rule});
    slot.SchedulesChanged();
  }
  return in.done();
}

void MemoryBackend::ScheduleAll() {
  RecountQueues();
  IndexSchedules();
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

size_t MemoryBackend::ReturnAllInflight() {
  std::unique_lock world(world_);
  size_t returned = 0;
  for (auto& [name, slot] : queues_) {
    std::lock_guard lock(slot->mu);
    returned += slot->queue.ReturnInflight();
  }
  return returned;
}

}  // namespace anteroom::store
