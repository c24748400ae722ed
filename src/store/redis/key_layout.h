#pragma once
// Names of the Redis keys of a room or a queue (docs/design.md has the whole layout). Every
// key of one room or queue shares the hash tag {r:NAME} or {q:NAME}: one slot, so each
// operation is one script on one node.

#include <string>
#include <vector>

namespace anteroom::store::redis {

class KeyLayout {
 public:
  explicit KeyLayout(std::string prefix) : prefix_(std::move(prefix)) {}

  // KEYS of room.lua, in its order.
  std::vector<std::string> Room(const std::string& room) const {
    std::string base = prefix_ + "{r:" + room + "}:";
    return {base + "m",  base + "l",  base + "s",  base + "d",  base + "v",  base + "x",
            base + "c",  base + "cf", base + "g",  base + "ln", base + "ld", base + "ev",
            base + "pq", base + "dw", base + "ps", base + "pg"};
  }
  // KEYS of queue.lua, in its order (the feed's two follow them on a single Redis).
  std::vector<std::string> Queue(const std::string& queue) const {
    std::string base = prefix_ + "{q:" + queue + "}:";
    std::vector<std::string> keys;
    keys.reserve(31);
    for (const char* k : {"m",  "j",  "p",  "h",    "r",   "d",  "l",  "x",  "u",  "a",  "ax",
                          "w",  "hb", "wj", "poll", "key", "g",  "gr", "gf", "go", "gp", "s",
                          "st", "f",  "fo", "jp",   "jl",  "dp", "dn", "b",  "bs"}) {
      keys.push_back(base + k);
    }
    return keys;
  }
  // The queue's own key (Backend::SetQueueKey), last of Queue()'s keys: a string holding the
  // key's SHA-256 digest as its 32 raw bytes (RESP and Lua strings are binary-safe), absent
  // when none is set. Written only by queue.lua (`setkey`), which also keeps a queue with a
  // key from being forgotten; read with a plain GET.
  std::string QueueKey(const std::string& queue) const { return prefix_ + "{q:" + queue + "}:key"; }
  // Rooms and queues by the time they next need the sweeper (members "r:NAME", "q:NAME").
  std::string Registry() const { return prefix_ + "registry"; }
  // Pub/Sub channel: a queue's name, published when long polls there should look again.
  std::string WakeChannel() const { return prefix_ + "wake"; }
  // Lifecycle events of every room and queue (a stream), and the newest position trimmed from it
  // (prelude.lua's feed). Passed after the script's own keys (room.lua's KEYS 17 and 18,
  // queue.lua's 32 and 33) on a single Redis; the stream's name is also the channel its writers
  // publish on.
  std::string Feed() const { return prefix_ + "feed"; }
  std::string FeedHorizon() const { return prefix_ + "feed-horizon"; }
  // Config entries of a kind (a hash: name -> value; store/backend.h ConfigEntry).
  std::string Config(const std::string& kind) const { return prefix_ + "config:" + kind; }
  // A role's holder (a string with a TTL) and its saved position: one slot ({role:NAME}).
  std::string Role(const std::string& role) const { return prefix_ + "{role:" + role + "}:holder"; }
  std::string RolePosition(const std::string& role) const {
    return prefix_ + "{role:" + role + "}:position";
  }
  // The token secret shared by every process on this Redis.
  std::string Secret() const { return prefix_ + "secret"; }
  // The asymmetric token signing key (PEM) of an algorithm ("EdDSA", "ES256"), shared alike.
  std::string TokenKey(const std::string& alg) const { return prefix_ + "token-key:" + alg; }
  // Written by the health check: a write proves changes would be kept (PING does not see a
  // read-only replica, maxmemory or a failing disk under MISCONF).
  std::string Health() const { return prefix_ + "health"; }
  // Every schedule's queue (a hash: schedule id -> queue name; store/redis/redis_schedules.cc):
  // how a schedule is found by its id, and what core::kMaxSchedules counts. A slot of its own:
  // written before the queue's script creates a schedule, removed after it deletes one, so an entry
  // whose queue holds no such schedule (a process stopped between the two) reads as absent.
  std::string ScheduleIndex() const { return prefix_ + "schedules"; }
  // The names of every room ('r') or queue ('q') created, for --max-rooms and --max-queues.
  std::string Names(char kind) const { return prefix_ + (kind == 'r' ? "rooms" : "queues"); }

 private:
  std::string prefix_;
};

}  // namespace anteroom::store::redis
