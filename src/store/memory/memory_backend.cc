#include "store/memory/memory_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace anteroom::store {

namespace {
constexpr int64_t kMaxTimerSleepMs = 1000;
}

struct MemoryBackend::RoomSlot final : Slot {
  RoomSlot(std::string n, core::RoomConfig config, int64_t ttl, int64_t now)
      : name(std::move(n)), room(config, ttl, now) {}
  int64_t NextDeadline() const override { return room.NextDeadline(); }
  void RunDue(int64_t now, Deferred&) override { room.Advance(now); }
  std::string name;
  core::Room room;
};

MemoryBackend::MemoryBackend(const Clock& clock, MemoryBackendOptions options)
    : clock_(clock), options_(std::move(options)), lease_key_(options_.lease_secret) {
  if (options_.run_timer) timer_ = std::thread([this] { TimerLoop(); });
}

MemoryBackend::~MemoryBackend() {
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
  info.active = slot.room.holders();
  info.waiting = slot.room.waiting();
  info.counters = slot.room.counters();
  return info;
}

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

template <typename T, typename Fn>
void MemoryBackend::OnRoom(const std::string& name, const Completion<T>& done, Fn&& fn) {
  std::optional<OpResult<T>> result;
  {
    std::shared_lock rooms_lock(rooms_mu_);
    auto it = rooms_.find(name);
    if (it == rooms_.end()) {
      result.emplace(OpStatus::kUnknownRoom, "no room named '" + name + "'");
    } else {
      std::lock_guard room_lock(it->second->mu);
      result.emplace(fn(*it->second, clock_.NowMs()));
      Schedule(it->second);
    }
  }
  done(std::move(*result));  // outside every lock: completions may take their time
}

void MemoryBackend::PutRoom(std::string room, core::RoomPatch patch,
                            Completion<core::RoomInfo> done) {
  std::optional<OpResult<core::RoomInfo>> result;
  {
    std::unique_lock rooms_lock(rooms_mu_);
    auto it = rooms_.find(room);
    if (it == rooms_.end()) {
      if (!patch.capacity) {
        result.emplace(OpStatus::kInvalidArgument, "capacity is required to create a room");
      } else {
        core::RoomConfig config;
        patch.ApplyTo(config);
        auto slot = std::make_shared<RoomSlot>(room, config, options_.token_ttl_ms, clock_.NowMs());
        std::lock_guard room_lock(slot->mu);
        rooms_.emplace(room, slot);
        result.emplace(Info(*slot));
      }
    } else {
      std::lock_guard room_lock(it->second->mu);
      it->second->room.Reconfigure(patch, clock_.NowMs());
      Schedule(it->second);
      result.emplace(Info(*it->second));
    }
  }
  done(std::move(*result));
}

void MemoryBackend::GetRoom(std::string room, Completion<core::RoomInfo> done) {
  OnRoom<core::RoomInfo>(room, done, [](RoomSlot& slot, int64_t now) {
    slot.room.Advance(now);
    return OpResult<core::RoomInfo>(Info(slot));
  });
}

void MemoryBackend::ListRooms(Completion<std::vector<core::RoomInfo>> done) {
  std::vector<core::RoomInfo> rooms;
  {
    std::shared_lock rooms_lock(rooms_mu_);
    rooms.reserve(rooms_.size());
    for (auto& [name, slot] : rooms_) {
      std::lock_guard room_lock(slot->mu);
      slot->room.Advance(clock_.NowMs());
      Schedule(slot);
      rooms.push_back(Info(*slot));
    }
  }
  std::sort(rooms.begin(), rooms.end(),
            [](const auto& a, const auto& b) { return a.room < b.room; });
  done(std::move(rooms));
}

void MemoryBackend::DeleteRoom(std::string room, Completion<core::RoomInfo> done) {
  std::optional<OpResult<core::RoomInfo>> result;
  {
    std::unique_lock rooms_lock(rooms_mu_);
    auto it = rooms_.find(room);
    if (it == rooms_.end()) {
      result.emplace(OpStatus::kUnknownRoom, "no room named '" + room + "'");
    } else {
      std::lock_guard room_lock(it->second->mu);
      it->second->room.Advance(clock_.NowMs());
      result.emplace(Info(*it->second));
    }
    if (it != rooms_.end()) rooms_.erase(it);  // the timer's weak_ptr lets go with it
  }
  done(std::move(*result));
}

void MemoryBackend::Check(std::string room, std::string session,
                          Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(room, done, [&](RoomSlot& slot, int64_t now) {
    return OpResult<core::SessionView>(slot.room.Check(session, now));
  });
}

void MemoryBackend::Touch(std::string room, std::string session,
                          Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(
      room, done, [&](RoomSlot& slot, int64_t now) { return slot.room.Touch(session, now); });
}

void MemoryBackend::Leave(std::string room, std::string session, bool final,
                          Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(room, done, [&](RoomSlot& slot, int64_t now) {
    return slot.room.Leave(session, final, now);
  });
}

void MemoryBackend::EndSession(std::string room, std::string session,
                               Completion<core::SessionView> done) {
  OnRoom<core::SessionView>(
      room, done, [&](RoomSlot& slot, int64_t now) { return slot.room.Evict(session, now); });
}

void MemoryBackend::IsRevoked(std::string room, std::string session, uint64_t admission,
                              Completion<bool> done) {
  OnRoom<bool>(room, done, [&](RoomSlot& slot, int64_t now) {
    return OpResult<bool>(slot.room.IsRevoked(session, admission, now));
  });
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
  for (auto& weak : due) {
    auto slot = weak.lock();
    if (!slot) continue;  // deleted
    std::lock_guard slot_lock(slot->mu);
    slot->RunDue(clock_.NowMs(), after);
    slot->scheduled = INT64_MAX;  // stale entries only cost a no-op pass
    Schedule(slot);
  }
  for (auto& fn : after) fn();
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
