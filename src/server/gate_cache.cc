#include "server/gate_cache.h"

#include <utility>

namespace anteroom::server {

GateCache::GateCache(store::Backend& backend, const Clock& clock)
    : backend_(backend), clock_(clock) {}

std::shared_ptr<const GateRoom> GateCache::Cached(const std::string& room) {
  std::lock_guard lock(mu_);
  auto it = rooms_.find(room);
  if (it == rooms_.end() || clock_.NowMs() - it->second.read_ms >= kFreshMs) return nullptr;
  return it->second.room;
}

void GateCache::Room(const std::string& room, Done done) {
  if (std::shared_ptr<const GateRoom> cached = Cached(room)) return done(std::move(cached));
  Fetch(room, std::move(done));
}

void GateCache::Fetch(const std::string& room, Done done) {
  backend_.GetRoom(room, [this, room, done = std::move(done)](OpResult<core::RoomInfo> info) {
    if (!info.ok())
      return done(OpResult<std::shared_ptr<const GateRoom>>(info.status(), info.message()));
    auto fresh = std::make_shared<GateRoom>();
    fresh->info = std::move(*info);
    std::shared_ptr<const GateSettings> previous;
    {
      std::lock_guard lock(mu_);
      auto it = rooms_.find(room);
      if (it != rooms_.end() && it->second.room->info.config.gate == fresh->info.config.gate) {
        previous = it->second.room->settings;
      }
    }
    if (previous) {
      fresh->settings = std::move(previous);
    } else if (fresh->info.config.gate) {
      fresh->settings = ParseGateText(*fresh->info.config.gate);
    }
    if (!fresh->settings) fresh->settings = std::make_shared<GateSettings>();
    {
      std::lock_guard lock(mu_);
      if (rooms_.size() >= kMaxRooms && !rooms_.contains(room)) rooms_.clear();
      rooms_[room] = Entry{fresh, clock_.NowMs()};
    }
    done(std::shared_ptr<const GateRoom>(std::move(fresh)));
  });
}

void GateCache::Forget(const std::string& room) {
  std::lock_guard lock(mu_);
  rooms_.erase(room);
}

bool GateCache::ShouldTouch(const std::string& room, const std::string& session, int64_t every_ms) {
  std::string key;
  key.reserve(room.size() + 1 + session.size());
  key.append(room).push_back('\0');
  key.append(session);
  int64_t now = clock_.NowMs();
  std::lock_guard lock(mu_);
  auto it = touched_.find(key);
  if (it != touched_.end() && now - it->second < every_ms) return false;
  if (it == touched_.end() && touched_.size() >= kMaxSessions) touched_.clear();
  touched_[key] = now;
  return true;
}

}  // namespace anteroom::server
