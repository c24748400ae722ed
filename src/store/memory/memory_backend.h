#pragma once
// The in-process backend: every room in memory, one mutex per room, and one timer thread that
// processes deadlines when they fall due (not when a client next calls), so freed slots reach
// the head of the line within a tick of their deadline. Idle rooms cost nothing: only rooms
// with a pending deadline are in the schedule.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "core/room.h"
#include "store/backend.h"

namespace anteroom::store {

struct MemoryBackendOptions {
  int64_t token_ttl_ms = 600'000;  // how long revocations are remembered
  bool run_timer = true;           // tests with a FakeClock call RunDue() themselves
};

class MemoryBackend final : public Backend {
 public:
  MemoryBackend(const Clock& clock, MemoryBackendOptions options);
  ~MemoryBackend() override;

  void PutRoom(std::string room, core::RoomPatch patch, Completion<core::RoomInfo> done) override;
  void GetRoom(std::string room, Completion<core::RoomInfo> done) override;
  void ListRooms(Completion<std::vector<core::RoomInfo>> done) override;
  void DeleteRoom(std::string room, Completion<core::RoomInfo> done) override;
  void Check(std::string room, std::string session, Completion<core::SessionView> done) override;
  void Touch(std::string room, std::string session, Completion<core::SessionView> done) override;
  void Leave(std::string room, std::string session, bool final,
             Completion<core::SessionView> done) override;
  void EndSession(std::string room, std::string session,
                  Completion<core::SessionView> done) override;
  void IsRevoked(std::string room, std::string session, uint64_t admission,
                 Completion<bool> done) override;

  // Processes every room deadline due now. The timer thread calls it; so may tests.
  void RunDue();

 private:
  struct RoomSlot {
    RoomSlot(std::string n, core::RoomConfig config, int64_t ttl, int64_t now)
        : name(std::move(n)), room(config, ttl, now) {}
    std::mutex mu;
    std::string name;
    core::Room room;
    int64_t scheduled = INT64_MAX;  // earliest wake-up already in the schedule (guarded by mu)
  };
  struct Wakeup {
    int64_t when;
    std::weak_ptr<RoomSlot> slot;
    bool operator>(const Wakeup& o) const { return when > o.when; }
  };

  // Runs fn(slot, now) under the room's lock and answers its result, or unknown_room.
  template <typename T, typename Fn>
  void OnRoom(const std::string& name, const Completion<T>& done, Fn&& fn);
  static core::RoomInfo Info(const RoomSlot& slot);
  // Call with slot.mu held, after any change to the room.
  void Schedule(const std::shared_ptr<RoomSlot>& slot);
  void TimerLoop();

  const Clock& clock_;
  MemoryBackendOptions options_;

  std::shared_mutex rooms_mu_;
  std::unordered_map<std::string, std::shared_ptr<RoomSlot>> rooms_;

  std::mutex schedule_mu_;
  std::condition_variable schedule_cv_;
  std::priority_queue<Wakeup, std::vector<Wakeup>, std::greater<>> schedule_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace anteroom::store
