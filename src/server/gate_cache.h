#pragma once
// What the gate keeps per process so a gated request costs next to nothing (docs/gate.md):
//
//  - each room's settings and counts, read from the backend at most once a second per room
//    (a change made through this process is seen at once: Forget), with the gate settings
//    parsed once per change of their text;
//  - when each admitted session was last told to the room (Touch), so a page of 50 assets is
//    one touch, not 50: at most one per session per `touch_every_ms`.
//
// Both are bounded (kMaxRooms, kMaxSessions) and start over when full: a flood of junk names or
// forged cookies costs backend reads, never memory.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "core/room_types.h"
#include "server/gate_settings.h"
#include "store/backend.h"

namespace anteroom::server {

struct GateRoom {
  core::RoomInfo info;
  std::shared_ptr<const GateSettings> settings;  // never null (defaults when unset)
};

class GateCache {
 public:
  static constexpr int64_t kFreshMs = 1000;
  static constexpr size_t kMaxRooms = 10'000;
  static constexpr size_t kMaxSessions = 200'000;

  GateCache(store::Backend& backend, const Clock& clock);

  using Done = std::function<void(OpResult<std::shared_ptr<const GateRoom>>)>;
  // The room when the cache holds it fresher than kFreshMs; nullptr otherwise.
  std::shared_ptr<const GateRoom> Cached(const std::string& room);
  // Reads the room from the backend into the cache (`done` may run inline or later on another
  // thread).
  void Fetch(const std::string& room, Done done);
  // Cached, else Fetch.
  void Room(const std::string& room, Done done);
  // This process changed or deleted the room: read it again next time.
  void Forget(const std::string& room);
  // Whether the session's activity is to be told to the room now (and notes that it is).
  bool ShouldTouch(const std::string& room, const std::string& session, int64_t every_ms);

 private:
  struct Entry {
    std::shared_ptr<const GateRoom> room;
    int64_t read_ms;
  };
  store::Backend& backend_;
  const Clock& clock_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> rooms_;      // guarded by mu_
  std::unordered_map<std::string, int64_t> touched_;  // guarded by mu_: room\0session
};

}  // namespace anteroom::server
