#include "store/redis/redis_backend.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "common/base64url.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "store/redis/lua_rules.h"
#include "store/redis/lua_scripts.h"
#include "store/redis/polls.h"
#include "store/redis/script_replies.h"

namespace anteroom::store::redis {

namespace asio = boost::asio;

namespace {
constexpr const char* kSweepBatch = "256";
// Roles (Backend::HoldRole): KEYS 1 holder (string with a TTL), 2 position; ARGV 1 the holder.
// hold_role: ARGV 2 ttl ms; answers the position ('' when none) to the holder, nil to others.
constexpr const char* kHoldRoleLua = R"lua(
local function run(KEYS, ARGV)
  local held = redis.call('GET', KEYS[1])
  if held and held ~= ARGV[1] then return nil end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
  return redis.call('GET', KEYS[2]) or ''
end
)lua";
// save_role: ARGV 2 the position; 1 when saved, 0 when another holds the role.
constexpr const char* kSaveRoleLua = R"lua(
local function run(KEYS, ARGV)
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
)lua";

// drop_index: KEYS 1 the schedule index; ARGV 1 a schedule id, 2 a queue. Removes the id's
// entry only while it names that queue (a put elsewhere may have taken the id since).
constexpr const char* kDropIndexLua = R"lua(
local function run(KEYS, ARGV)
  if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
)lua";

bool IsTransient(const Reply& r) {
  for (const char* p : {"OOM", "LOADING", "BUSY", "MASTERDOWN", "READONLY", "CLUSTERDOWN",
                        "TRYAGAIN", "NOREPLICAS", "MOVED", "ASK"}) {
    if (r.IsError(p)) return true;
  }
  return false;
}

std::string Opt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; }
std::string OptNone(const std::optional<std::optional<int64_t>>& v) {
  if (!v) return "";
  return *v ? std::to_string(**v) : "-1";
}
std::string OptBool(const std::optional<bool>& v) {
  if (!v) return "";
  return *v ? "1" : "0";
}
// The script's argument for a text setting (target URL, gate, page): '' keeps it, '-' clears it,
// '=TEXT' sets it (any bytes: arguments and Lua strings are binary-safe).
std::string OptText(const std::optional<std::optional<std::string>>& v) {
  if (!v) return "";
  return *v ? "=" + **v : "-";
}

// Bytes as lowercase hex digits, two a byte (how room.lua keeps and compares pass digests).
std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

core::DrawSeed OsSeed() {
  core::DrawSeed seed;
  std::string bytes = RandomBytes(seed.size());
  std::copy(bytes.begin(), bytes.end(), seed.begin());
  return seed;
}

// room.lua event_put's arguments after the id (event_of_args).
std::vector<std::string> EventArgs(const std::string& id, const core::EventSpec& spec) {
  const core::EventOverrides& o = spec.overrides;
  return {"event_put",
          id,
          spec.name,
          Opt(spec.prequeue_at),
          std::to_string(spec.starts_at),
          std::to_string(spec.ends_at),
          spec.shuffle_at_start ? "1" : "0",
          core::ToString(spec.prequeue_scope),
          spec.suspended ? "1" : "0",
          Opt(o.capacity),
          Opt(o.admit_per_minute),
          Opt(o.grace_ms),
          Opt(o.checkin_timeout_ms),
          o.queueing_method ? core::ToString(*o.queueing_method) : "",
          o.page ? "=" + *o.page : ""};
}

}  // namespace

RedisBackend::RedisBackend(const Clock& clock, RedisBackendOptions options)
    : clock_(clock),
      options_(std::move(options)),
      keys_(options_.key_prefix),
      lease_key_(options_.lease_secret),
      room_script_("room", LuaRules() + lua::kRoom),
      queue_script_("queue", LuaRules() + lua::kQueue),
      sweep_script_("sweep", lua::kSweep),
      feed_script_("feed", lua::kFeed),
      hold_role_script_("hold_role", kHoldRoleLua),
      save_role_script_("save_role", kSaveRoleLua),
      index_drop_script_("drop_index", kDropIndexLua) {
  std::string error;
  auto url = ParseRedisUrl(options_.url, error);
  if (!url) throw std::runtime_error(error);
  feed_ = !url->cluster;
  // One TLS context for every shard's connections (OpenSSL makes sessions from it on any thread).
  tls_ = TlsContextFor(*url, options_.tls);
  std::vector<asio::io_context*> contexts = options_.contexts;
  if (contexts.empty()) {
    own_io_ = std::make_unique<asio::io_context>();
    contexts.push_back(own_io_.get());
  }
  for (asio::io_context* io : contexts) {
    shards_.push_back(
        std::make_unique<Shard>(*io, *url, options_.timeout_ms, tls_, lease_key_, OsSeed()));
  }
  sweep_timer_ = std::make_unique<asio::steady_timer>(home().io);
  shared_watch_ = std::make_unique<SharedValueWatch>(
      home().io, *home().client, std::chrono::milliseconds(options_.shared_check_ms));
  // Fail at start-up, with the reason, when Redis cannot be reached (the contexts may not run
  // yet: this check has an io_context of its own).
  {
    asio::io_context probe_io;
    ClusterClient probe(probe_io, *url, options_.timeout_ms, tls_);
    std::string problem = "no answer within " + std::to_string(options_.timeout_ms) + " ms";
    probe.Start([&](std::string err) {
      problem = err;
      probe_io.stop();
    });
    probe_io.run_for(std::chrono::milliseconds(options_.timeout_ms + 500));
    probe.Close();
    probe_io.restart();
    probe_io.poll();
    if (!problem.empty()) throw std::runtime_error("redis at " + options_.url + ": " + problem);
  }
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    asio::post(s->io, [s] { s->client->Start([](std::string) {}); });  // the slot map
  }
  asio::post(home().io, [this] {
    subscriber_ = home().client->NewSubscriber();
    subscriber_->OnMessage([this](const std::string& channel, const std::string& queue) {
      if (channel == keys_.Feed()) return TellWatchers();
      Wake(queue);
    });
    subscriber_->OnUp([this] {
      subscriber_->Command({"SUBSCRIBE", keys_.WakeChannel()}, [](Reply) {});
      if (feed_) {
        subscriber_->Command({"SUBSCRIBE", keys_.Feed()}, [](Reply) {});
        TellWatchers();  // events may have come while it was down
      }
      // Messages may have been missed while down: every long poll looks again.
      WakeAll();
      // Redis may have come back empty (restarted without persistence): shared values again.
      shared_watch_->CheckNow();
    });
    ArmSweeper();
  });
  if (own_io_) {
    own_thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(*own_io_);
      own_io_->run();
    });
  }
}

RedisBackend::~RedisBackend() {
  auto stop_home = [this] {
    sweep_timer_->cancel();
    shared_watch_->Stop();
    for (auto& [queue, polls] : polls_) {
      for (auto& w : polls->waiters) {
        w->Retire();
        w->done(OpResult<core::FetchAnswer>(OpStatus::kUnavailable,
                                            std::string(wire::kServerStopping)));
      }
    }
    polls_.clear();
    if (subscriber_) subscriber_->Close();
  };
  // On each shard's own thread while it runs; directly once its threads are gone.
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard* s = shards_[i].get();
    auto stop = [s, i, stop_home] {
      if (i == 0) stop_home();
      s->client->Close();
    };
    if (s->io.stopped()) {
      stop();
      continue;
    }
    std::promise<void> stopped;
    asio::post(s->io, [&] {
      stop();
      stopped.set_value();
    });
    auto future = stopped.get_future();
    if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) stop();
  }
  if (own_io_) {
    own_io_->stop();
    own_thread_.join();
  }
}

std::string RedisBackend::NowArg() const {
  return options_.redis_time ? std::string() : std::to_string(clock_.NowMs());
}

std::string RedisBackend::Entropy(Shard& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * sizeof(core::DrawSeed));
  for (size_t words = 0; words < sizeof(core::DrawSeed) / sizeof(uint32_t); ++words) {
    uint32_t word = s.entropy.Next32();
    for (int byte = 0; byte < 4; ++byte, word >>= 8) {
      hex += kHex[(word >> 4) & 0xf];
      hex += kHex[word & 0xf];
    }
  }
  return hex;
}

// ---- scripts -------------------------------------------------------------------------------

namespace {
// The reply of a script as an OpResult: its status word checked, Redis errors mapped.
OpResult<Reply> Checked(Reply r) {
  if (r.type == Reply::Type::kTransport) {
    return {OpStatus::kUnavailable, wire::RedisUnavailable(r.str)};
  }
  if (r.type == Reply::Type::kError) {
    if (IsTransient(r)) return {OpStatus::kUnavailable, wire::RedisBusy(r.str)};
    return {OpStatus::kInternal, "redis: " + r.str};
  }
  ScriptStatus status = ParseStatus(r);
  const std::string& word = status.word;
  if (word == "ok") return OpResult<Reply>(std::move(r));
  if (word == "unknown_session") {
    return {OpStatus::kUnknownSession, std::string(wire::kSessionNotInRoom)};
  }
  if (word == "invalid_argument") return {OpStatus::kInvalidArgument, std::move(status.message)};
  if (word == "rate_limited") {
    return OpResult<Reply>(OpStatus::kRateLimited, std::move(status.message))
        .WithRetryAfter(status.retry_after_ms);
  }
  if (word == "challenge_required") {
    return {OpStatus::kChallengeRequired, std::move(status.message)};
  }
  if (word == "unknown_room") return {OpStatus::kUnknownRoom, ""};
  if (word == "invalid") return {OpStatus::kInvalidArgument, std::move(status.message)};
  if (word == "conflict") return {OpStatus::kConflict, std::move(status.message)};
  if (word == "not_found") return {OpStatus::kNotFound, std::move(status.message)};
  if (word == "limit_reached") return {OpStatus::kLimitReached, std::move(status.message)};
  // A queue's batches (queue.lua op_push, op_create_batch): the words alone, the texts here.
  if (word == "unknown_batch") return {OpStatus::kUnknownBatch, std::string(wire::kUnknownBatch)};
  if (word == "batch_sealed") return {OpStatus::kConflict, std::string(wire::kBatchSealed)};
  if (word == "batch_exists") return {OpStatus::kConflict, std::string(wire::kBatchExists)};
  if (word == "too_many_batches") {
    return {OpStatus::kLimitReached, std::string(wire::kTooManyBatches)};
  }
  return {OpStatus::kInternal, "redis: unexpected answer from a script"};
}
}  // namespace

void RedisBackend::RoomScript(Shard& s, const std::string& room, std::vector<std::string> argv,
                              ReplyFn k) {
  argv.insert(argv.begin() + 1, {NowArg(), std::to_string(options_.token_ttl_ms), Entropy(s)});
  std::vector<std::string> keys = keys_.Room(room);
  if (feed_) keys.insert(keys.end(), {keys_.Feed(), keys_.FeedHorizon()});
  s.client->Eval(room_script_, std::move(keys), std::move(argv), [this, &s, room, k](Reply r) {
    AfterScript(s, 'r', room, r);
    OpResult<Reply> result = Checked(std::move(r));
    if (result.status() == OpStatus::kUnknownRoom) {
      return k({OpStatus::kUnknownRoom, wire::UnknownRoom(room)});
    }
    k(std::move(result));
  });
}

void RedisBackend::QueueScript(Shard& s, const std::string& queue, std::vector<std::string> argv,
                               ReplyFn k) {
  argv.insert(argv.begin() + 1, NowArg());
  std::vector<std::string> keys = keys_.Queue(queue);
  if (feed_) keys.insert(keys.end(), {keys_.Feed(), keys_.FeedHorizon()});
  s.client->Eval(queue_script_, std::move(keys), std::move(argv), [this, &s, queue, k](Reply r) {
    AfterScript(s, 'q', queue, r);
    k(Checked(std::move(r)));
  });
}

// A script answers a deadline to register (>= 0) after its status word, and queues whether
// long polls should look again.
void RedisBackend::AfterScript(Shard& s, char kind, const std::string& name, const Reply& reply) {
  ScriptEffects effects = ParseEffects(reply, kind == 'q');
  if (effects.register_deadline) {
    Register(s, std::string(1, kind) + ":" + name, *effects.register_deadline);
  }
  if (effects.wake) Publish(s, name);
  for (int64_t waited : effects.room_waits_ms) ObserveRoomWait(waited);
}

void RedisBackend::Register(Shard& s, const std::string& member, int64_t when) {
  s.client->Call(keys_.Registry(), {"ZADD", keys_.Registry(), "LT", std::to_string(when), member},
                 [&s](Reply r) {
                   if (r.failed() && !s.client->closed())
                     spdlog::warn("redis: could not update the registry: {}", r.str);
                 });
}

void RedisBackend::Publish(Shard& s, const std::string& queue) {
  s.client->Call("", {"PUBLISH", keys_.WakeChannel(), queue}, [](Reply) {});
}

// ---- rooms ---------------------------------------------------------------------------------

void RedisBackend::WithinCap(Shard& s, char kind, const std::string& name,
                             std::function<void(std::optional<std::string>)> k) {
  size_t cap = kind == 'r' ? options_.max_rooms : options_.max_queues;
  if (cap == 0 || s.known.count(kind + name)) return k(std::nullopt);
  std::string set = keys_.Names(kind);
  auto member = std::make_shared<bool>(false);
  // Both on the connection of the set's slot: answered in order.
  s.client->Call(set, {"SISMEMBER", set, name},
                 [member](Reply r) { *member = !r.failed() && r.AsInt() == 1; });
  s.client->Call(set, {"SCARD", set}, [&s, kind, name, cap, member, k](Reply r) {
    // Redis unreachable: the script that follows answers 503 on its own.
    if (*member || r.failed() || static_cast<size_t>(r.AsInt()) < cap) {
      if (*member) s.known.insert(kind + name);
      return k(std::nullopt);
    }
    k(kind == 'r' ? wire::TooManyRooms(cap) : wire::TooManyQueues(cap));
  });
}

void RedisBackend::Created(Shard& s, char kind, const std::string& name,
                           std::function<void()> then) {
  if ((kind == 'r' ? options_.max_rooms : options_.max_queues) == 0) return then();
  if (!s.known.insert(kind + name).second) return then();
  if (s.known.size() > kKnownNames) s.known.clear();
  // Answered once the name is counted, so a creation that follows the answer sees it.
  s.client->Call(keys_.Names(kind), {"SADD", keys_.Names(kind), name},
                 [then = std::move(then)](Reply) { then(); });
}

void RedisBackend::Uncounted(Shard& s, char kind, const std::string& name,
                             std::function<void()> then) {
  if ((kind == 'r' ? options_.max_rooms : options_.max_queues) == 0) return then();
  s.known.erase(kind + name);
  // Answered once the name is uncounted, so a creation that follows the answer fits.
  s.client->Call(keys_.Names(kind), {"SREM", keys_.Names(kind), name},
                 [then = std::move(then)](Reply) { then(); });
}

void RedisBackend::PutRoom(std::string room, core::RoomPatch patch,
                           Completion<core::RoomInfo> done) {
  Post([this, room = std::move(room), patch, done = std::move(done)](Shard& s) {
    auto put = [this, &s, room, patch, done] {
      RoomScript(
          s, room,
          {"put", Opt(patch.capacity), Opt(patch.grace_ms), Opt(patch.checkin_timeout_ms),
           OptNone(patch.idle_timeout_ms), OptNone(patch.admit_per_minute), OptBool(patch.paused),
           OptText(patch.target_url), OptNone(patch.joins_per_minute_per_client),
           OptNone(patch.places_per_client), OptNone(patch.challenge_difficulty),
           std::to_string(NewIncarnation()), OptText(patch.gate),
           patch.queueing_method ? core::ToString(*patch.queueing_method) : "",
           patch.include_active ? "1" : "0", OptText(patch.page),
           OptNone(patch.notify_at_position)},
          [this, &s, room, done](OpResult<Reply> r) {
            if (!r.ok()) return done({r.status(), r.message()});
            Created(s, 'r', room, [done, info = ParseRoomInfo(room, *r)] { done(info); });
          });
    };
    if (!patch.capacity) return put();  // a change: creates nothing
    WithinCap(s, 'r', room, [put, done](std::optional<std::string> refusal) {
      if (refusal) return done({OpStatus::kLimitReached, std::move(*refusal)});
      put();
    });
  });
}

void RedisBackend::GetRoom(std::string room, Completion<core::RoomInfo> done) {
  Post([this, room = std::move(room), done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"get"}, [room, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParseRoomInfo(room, *r));
    });
  });
}

void RedisBackend::DeleteRoom(std::string room, Completion<core::RoomInfo> done) {
  Post([this, room = std::move(room), done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"delete"}, [this, &s, room, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      s.client->Call(keys_.Registry(), {"ZREM", keys_.Registry(), "r:" + room}, [](Reply) {});
      s.known.erase('r' + room);
      // Answered once the name is uncounted, so a creation that follows the answer fits.
      s.client->Call(
          keys_.Names('r'), {"SREM", keys_.Names('r'), room},
          [done, info = ParseRoomInfo(room, *r)](Reply) mutable { done(std::move(info)); });
    });
  });
}

// Rooms are listed from the registry, then read one by one (each in its own slot).
// On a single Redis, from the feed every process writes (feed.lua). Not kept on Redis Cluster:
// the stream answers 503 saying so rather than an empty stream that would look like a quiet
// backend.
void RedisBackend::ReadEvents(std::optional<EventId> after, size_t max,
                              Completion<EventRead> done) {
  if (!feed_) {
    return done(
        OpResult<EventRead>(OpStatus::kUnavailable, std::string(wire::kEventsNotOnCluster)));
  }
  Post([this, after, max, done = std::move(done)](Shard& s) {
    s.client->Eval(feed_script_, {keys_.Feed(), keys_.FeedHorizon()},
                   {after ? after->ToString() : std::string(), std::to_string(max)},
                   [done](Reply r) {
                     if (r.type == Reply::Type::kTransport) {
                       return done({OpStatus::kUnavailable, wire::RedisUnavailable(r.str)});
                     }
                     std::optional<EventRead> read = ParseEventRead(r);
                     if (!read) {
                       return done({OpStatus::kInternal, "redis: unexpected answer from feed.lua"});
                     }
                     done(OpResult<EventRead>(std::move(*read)));
                   });
  });
}

namespace {
// A plain command's failure as an OpResult (nullopt: it went through).
std::optional<OpStatus> Failed(const Reply& r, std::string& message) {
  if (r.type == Reply::Type::kTransport) {
    message = wire::RedisUnavailable(r.str);
    return OpStatus::kUnavailable;
  }
  if (r.type == Reply::Type::kError) {
    message = "redis: " + r.str;
    return IsTransient(r) ? OpStatus::kUnavailable : OpStatus::kInternal;
  }
  return std::nullopt;
}
}  // namespace

void RedisBackend::HoldRole(std::string role, std::string holder, int64_t ttl_ms,
                            Completion<std::optional<std::string>> done) {
  Post([this, role = std::move(role), holder = std::move(holder), ttl_ms,
        done = std::move(done)](Shard& s) {
    s.client->Eval(hold_role_script_, {keys_.Role(role), keys_.RolePosition(role)},
                   {holder, std::to_string(ttl_ms)}, [done](Reply r) {
                     std::string message;
                     if (auto status = Failed(r, message)) return done({*status, message});
                     if (r.type != Reply::Type::kString) {
                       return done(std::optional<std::string>());
                     }
                     done(std::optional<std::string>(r.str));
                   });
  });
}

void RedisBackend::SaveRolePosition(std::string role, std::string holder, std::string position,
                                    Completion<bool> done) {
  Post([this, role = std::move(role), holder = std::move(holder), position = std::move(position),
        done = std::move(done)](Shard& s) {
    s.client->Eval(save_role_script_, {keys_.Role(role), keys_.RolePosition(role)},
                   {holder, position}, [done](Reply r) {
                     std::string message;
                     if (auto status = Failed(r, message)) return done({*status, message});
                     done(r.AsInt() == 1);
                   });
  });
}

void RedisBackend::PutConfig(ConfigEntry entry, Completion<Done> done) {
  Post([this, entry = std::move(entry), done = std::move(done)](Shard& s) {
    std::string key = keys_.Config(entry.kind);
    s.client->Call(key, {"HSET", key, entry.name, entry.value}, [done](Reply r) {
      std::string message;
      if (auto status = Failed(r, message)) return done({*status, message});
      done(Done{});
    });
  });
}

void RedisBackend::DeleteConfig(std::string kind, std::string name, Completion<bool> done) {
  Post([this, kind = std::move(kind), name = std::move(name), done = std::move(done)](Shard& s) {
    std::string key = keys_.Config(kind);
    s.client->Call(key, {"HDEL", key, name}, [done](Reply r) {
      std::string message;
      if (auto status = Failed(r, message)) return done({*status, message});
      done(r.AsInt() == 1);
    });
  });
}

void RedisBackend::ListConfig(std::string kind, Completion<std::vector<ConfigEntry>> done) {
  Post([this, kind = std::move(kind), done = std::move(done)](Shard& s) {
    std::string key = keys_.Config(kind);
    s.client->Call(key, {"HGETALL", key}, [kind, done](Reply r) {
      std::string message;
      if (auto status = Failed(r, message)) return done({*status, message});
      std::vector<ConfigEntry> out;
      for (size_t k = 0; k + 1 < r.elements.size(); k += 2) {
        out.push_back({kind, r.elements[k].str, r.elements[k + 1].str});
      }
      std::sort(out.begin(), out.end(),
                [](const ConfigEntry& a, const ConfigEntry& b) { return a.name < b.name; });
      done(std::move(out));
    });
  });
}

void RedisBackend::WatchEvents(std::function<void()> fn) {
  std::lock_guard lock(watchers_mu_);
  watchers_.push_back(std::move(fn));
}

void RedisBackend::TellWatchers() {
  std::vector<std::function<void()>> watchers;
  {
    std::lock_guard lock(watchers_mu_);
    watchers = watchers_;
  }
  for (auto& fn : watchers) fn();
}

// A process whose token secret (or signing key) is not the one Redis holds is reported too:
// its tokens and leases do not verify on the other processes, so it should get no traffic.
void RedisBackend::CheckHealth(Completion<HealthReport> done) {
  Post([this, done = std::move(done)](Shard& s) {
    s.client->Call(
        keys_.Health(), {"SET", keys_.Health(), "1", "PX", "10000"}, [this, done](Reply r) {
          if (r.failed()) {
            return done(HealthReport{.changes_ok = false,
                                     .problem = "the Redis store refuses changes: " + r.str});
          }
          if (std::string split = shared_watch_->problem(); !split.empty()) {
            return done(HealthReport{.changes_ok = false, .problem = split});
          }
          done(HealthReport{});
        });
  });
}

void RedisBackend::ListRooms(Completion<std::vector<core::RoomInfo>> done) {
  Post([this, done = std::move(done)](Shard& s) {
    auto read = [this](Shard& s, const std::string& name, Answer<core::RoomInfo> answer) {
      RoomScript(s, name, {"get"}, [name, answer](OpResult<Reply> r) {
        if (r.ok()) return answer(std::optional(ParseRoomInfo(name, *r)));
        if (r.status() == OpStatus::kUnknownRoom) return answer(std::optional<core::RoomInfo>());
        answer({r.status(), r.message()});
      });
    };
    ReadRegistered<core::RoomInfo>(
        s, 'r', read, [done](OpResult<std::vector<std::pair<std::string, core::RoomInfo>>> list) {
          if (!list.ok()) return done({list.status(), list.message()});
          std::vector<core::RoomInfo> rooms;
          for (auto& [name, info] : *list) rooms.push_back(std::move(info));
          done(std::move(rooms));
        });
  });
}

void RedisBackend::SessionOp(std::string room, std::string op, std::string session,
                             std::vector<std::string> more, Completion<core::SessionView> done) {
  Post([this, room = std::move(room), op = std::move(op), session = std::move(session),
        more = std::move(more), done = std::move(done)](Shard& s) {
    std::vector<std::string> argv{op, session};
    argv.insert(argv.end(), more.begin(), more.end());
    RoomScript(s, room, std::move(argv), [session, done](OpResult<Reply> r) {
      if (!r.ok()) {
        return done(OpResult<core::SessionView>(r.status(), r.message())
                        .WithRetryAfter(r.retry_after_ms()));
      }
      done(ParseSessionView(session, *r));
    });
  });
}

// A pass goes to the script as the id its code names and the code's SHA-256 (room.lua op_check),
// only when it carries one: a check without a pass sends what it did.
void RedisBackend::Check(std::string room, std::string session, core::Arrival arrival,
                         Completion<core::SessionView> done) {
  std::vector<std::string> more{std::move(arrival.client), std::to_string(arrival.proof_bits),
                                std::to_string(options_.max_clients_per_room)};
  if (!arrival.pass.empty()) {
    more.push_back("=" + std::string(core::PassIdOfCode(arrival.pass)));
    // Too long to be a code: a digest that matches no pass (core PassRefusal's first test).
    more.push_back(arrival.pass.size() > core::kMaxPassCodeBytes
                       ? std::string()
                       : Hex(core::PassDigest(arrival.pass)));
  }
  SessionOp(std::move(room), "check", std::move(session), std::move(more), std::move(done));
}

void RedisBackend::Touch(std::string room, std::string session,
                         Completion<core::SessionView> done) {
  SessionOp(std::move(room), "touch", std::move(session), {}, std::move(done));
}

void RedisBackend::Leave(std::string room, std::string session, bool final,
                         Completion<core::SessionView> done) {
  SessionOp(std::move(room), "leave", std::move(session), {final ? "1" : "0"}, std::move(done));
}

void RedisBackend::EndSession(std::string room, std::string session,
                              Completion<core::SessionView> done) {
  SessionOp(std::move(room), "evict", std::move(session), {}, std::move(done));
}

void RedisBackend::IsRevoked(std::string room, std::string session, uint64_t admission,
                             Completion<bool> done) {
  Post([this, room = std::move(room), session = std::move(session), admission,
        done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"revoked", session, std::to_string(admission)}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParseIsRevoked(*r));
    });
  });
}

void RedisBackend::AdmissionHolder(std::string room, uint64_t incarnation, uint64_t admission,
                                   Completion<std::optional<std::string>> done) {
  Post([this, room = std::move(room), incarnation, admission, done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"holder", std::to_string(incarnation), std::to_string(admission)},
               [done](OpResult<Reply> r) {
                 if (!r.ok()) return done({r.status(), r.message()});
                 done(ParseAdmissionHolder(*r));
               });
  });
}

void RedisBackend::PutEvent(std::string room, std::string id, core::EventSpec spec,
                            Completion<core::RoomEvent> done) {
  Post([this, room = std::move(room), argv = EventArgs(id, spec),
        done = std::move(done)](Shard& s) mutable {
    RoomScript(s, room, std::move(argv), [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParseRoomEvent(*r));
    });
  });
}

// Minted here as the embedded backend mints them (MemoryBackend::MintPasses): each code
// "<id>.<secret>", a random 12-character id and 128 random bits; room.lua gets the ids and the
// codes' digests, never a code, and answers the time it kept them at.
void RedisBackend::MintPasses(std::string room, core::PassMint mint,
                              Completion<std::vector<core::MintedPass>> done) {
  std::vector<core::MintedPass> minted;
  std::vector<std::string> argv{"pass_add", core::ToString(mint.kind), std::to_string(mint.uses),
                                Opt(mint.expires_at)};
  minted.reserve(static_cast<size_t>(std::max<int64_t>(0, mint.count)));
  for (int64_t k = 0; k < mint.count; ++k) {
    core::MintedPass m;
    m.pass.id = Base64UrlEncode(RandomBytes(9));
    m.code = m.pass.id + "." + NewRandomId();
    m.pass.digest = core::PassDigest(m.code);
    m.pass.kind = mint.kind;
    m.pass.uses = m.pass.uses_left = mint.uses;
    m.pass.expires_at = mint.expires_at;
    argv.push_back(m.pass.id);
    argv.push_back(Hex(m.pass.digest));
    minted.push_back(std::move(m));
  }
  Post([this, room = std::move(room), argv = std::move(argv), minted = std::move(minted),
        done = std::move(done)](Shard& s) mutable {
    RoomScript(s, room, std::move(argv),
               [minted = std::move(minted), done](OpResult<Reply> r) mutable {
                 if (!r.ok()) return done({r.status(), r.message()});
                 int64_t created_at = ParsePassesAdded(*r);
                 for (core::MintedPass& m : minted) m.pass.created_at = created_at;
                 done(std::move(minted));
               });
  });
}

void RedisBackend::ListPasses(std::string room, Completion<std::vector<core::RoomPass>> done) {
  Post([this, room = std::move(room), done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"passes"}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParsePasses(*r));
    });
  });
}

void RedisBackend::RevokePasses(std::string room, std::optional<std::string> id,
                                Completion<int64_t> done) {
  Post([this, room = std::move(room), which = id ? "=" + *id : std::string(),
        done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"pass_revoke", which}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParseRevokedPasses(*r));
    });
  });
}

void RedisBackend::ListEvents(std::string room, Completion<std::vector<core::RoomEvent>> done) {
  Post([this, room = std::move(room), done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"events"}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParseEvents(*r));
    });
  });
}

void RedisBackend::DeleteEvent(std::string room, std::string id, Completion<core::RoomEvent> done) {
  Post([this, room = std::move(room), id = std::move(id), done = std::move(done)](Shard& s) {
    RoomScript(s, room, {"event_delete", id}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParseRoomEvent(*r));
    });
  });
}

void RedisBackend::ReadLine(std::string room, uint64_t since, Completion<core::LineView> done) {
  Post([this, room = std::move(room), since, done = std::move(done)](Shard& s) mutable {
    ReadLineOn(s, std::move(room), since, true, std::move(done));
  });
}

namespace {
// "a b c ..." of decimal numbers at the start of `text`, up to the first '\n'.
bool ParseHeader(std::string_view text, std::initializer_list<uint64_t*> out) {
  std::string_view head = text.substr(0, text.find('\n'));
  const char* p = head.data();
  const char* end = head.data() + head.size();
  for (uint64_t* v : out) {
    if (p < end && *p == ' ') ++p;
    auto [next, ec] = std::from_chars(p, end, *v);
    if (ec != std::errc()) return false;
    p = next;
  }
  return p == end;
}

// The ids of room.lua's line snapshot, "VER\nID\nID...", in order.
core::IdList SnapshotLine(std::string_view text) {
  size_t at = text.find('\n');
  text = at == std::string_view::npos ? std::string_view() : text.substr(at + 1);
  size_t n = text.empty() ? 0 : static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  core::IdList line;
  line.Reserve(n, text.size());
  while (!text.empty()) {
    size_t end = text.find('\n');
    line.Add(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return line;
}
}  // namespace

bool RedisBackend::ApplyLineDeltas(LineCache& c, const std::vector<std::string>& entries,
                                   uint64_t incarnation, uint64_t version) {
  if (c.incarnation != incarnation || c.version > version) return false;
  // Net effect of the entries: sessions of c.line gone, then sessions appended in order (an
  // empty view: appended, then gone again).
  std::unordered_set<std::string_view> removed;
  std::vector<std::string_view> added;
  std::unordered_map<std::string_view, size_t> added_at;
  uint64_t at = c.version;
  for (std::string_view text : entries) {
    uint64_t inc = 0, from = 0, to = 0, count = 0;
    if (!ParseHeader(text, {&inc, &from, &to, &count}) || inc != incarnation) {
      return false;
    }
    if (to <= c.version) continue;  // already in c (a read answered after a later one)
    if (from != at) return false;
    at = to;
    uint64_t seen = 0;
    for (size_t pos = text.find('\n'); pos != std::string_view::npos;) {
      size_t next = text.find('\n', pos + 1);
      std::string_view item = text.substr(
          pos + 1, next == std::string_view::npos ? std::string_view::npos : next - pos - 1);
      pos = next;
      ++seen;
      if (item.size() < 2) return false;
      std::string_view id = item.substr(1);
      if (item[0] == '+') {
        if (!added_at.emplace(id, added.size()).second) return false;
        added.push_back(id);
      } else if (item[0] == '-') {
        if (auto it = added_at.find(id); it != added_at.end()) {
          added[it->second] = {};
          added_at.erase(it);
        } else if (!removed.insert(id).second) {
          return false;
        }
      } else {
        return false;
      }
    }
    if (seen != count) return false;
  }
  if (at != version) return false;
  core::IdList next;
  size_t hits = 0;
  if (removed.empty()) {
    next = c.line;
  } else {
    next.Reserve(c.line.size() + added.size(), 0);
    for (size_t i = 0; i < c.line.size(); ++i) {
      if (removed.count(c.line[i])) {
        ++hits;
      } else {
        next.Add(c.line[i]);
      }
    }
    if (hits != removed.size()) return false;
  }
  for (std::string_view id : added) {
    if (!id.empty()) next.Add(id);
  }
  c.line = std::move(next);
  c.version = version;
  return true;
}

// The line comes whole (room.lua's snapshot, "VER\nID\nID...") or as the entries of the room's
// delta log from the version this shard keeps (an array): applied to the kept line, or, on
// any doubt, asked for again whole.
void RedisBackend::ReadLineOn(Shard& s, std::string room, uint64_t since, bool deltas,
                              Completion<core::LineView> done) {
  auto now = std::chrono::steady_clock::now();
  if (now - s.lines_swept > std::chrono::milliseconds(kLineIdleMs / 4)) {
    s.lines_swept = now;
    std::erase_if(s.lines, [&](const auto& kv) {
      return now - kv.second.used > std::chrono::milliseconds(kLineIdleMs);
    });
  }
  std::string kept_version = "0", kept_incarnation = "0";
  if (auto it = s.lines.find(room); deltas && it != s.lines.end()) {
    kept_version = std::to_string(it->second.version);
    kept_incarnation = std::to_string(it->second.incarnation);
  }
  RoomScript(s, room, {"line", std::to_string(since), kept_version, kept_incarnation},
             [this, &s, room, since, deltas, done](OpResult<Reply> r) {
               if (!r.ok()) {
                 if (r.status() == OpStatus::kUnknownRoom) s.lines.erase(room);
                 return done({r.status(), r.message()});
               }
               LineReply reply = ParseLine(std::move(*r));
               core::LineView v = std::move(reply.counts);
               v.changed = v.version != since;
               if (!v.changed) return done(std::move(v));
               if (reply.deltas) {
                 auto it = s.lines.find(room);
                 if (!deltas || it == s.lines.end() ||
                     !ApplyLineDeltas(it->second, *reply.deltas, reply.incarnation, v.version) ||
                     it->second.line.size() != static_cast<size_t>(v.waiting)) {
                   if (!deltas)
                     return done({OpStatus::kInternal, "redis: deltas after asking for none"});
                   line_fallback_.fetch_add(1, std::memory_order_relaxed);
                   spdlog::debug(
                       "redis: the line deltas of room '{}' did not apply; reading it whole", room);
                   if (it != s.lines.end()) s.lines.erase(it);
                   return ReadLineOn(s, room, since, false, done);
                 }
                 line_delta_.fetch_add(1, std::memory_order_relaxed);
                 it->second.used = std::chrono::steady_clock::now();
                 v.line = it->second.line;
                 return done(std::move(v));
               }
               line_full_.fetch_add(1, std::memory_order_relaxed);
               v.line = SnapshotLine(reply.snapshot);
               if (s.lines.size() >= kLineRooms && !s.lines.count(room)) s.lines.clear();
               s.lines[room] = LineCache{.incarnation = reply.incarnation,
                                         .version = v.version,
                                         .line = v.line,
                                         .used = std::chrono::steady_clock::now()};
               done(std::move(v));
             });
}

void RedisBackend::Present(std::string room, std::vector<std::string> sessions,
                           Completion<std::vector<core::SessionView>> done) {
  Post([this, room = std::move(room), sessions = std::move(sessions),
        done = std::move(done)](Shard& s) mutable {
    std::vector<std::string> argv{"present"};
    argv.insert(argv.end(), sessions.begin(), sessions.end());
    RoomScript(s, room, std::move(argv), [sessions = std::move(sessions), done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ParsePresent(sessions, *r));
    });
  });
}

// ---- sweeping ------------------------------------------------------------------------------

void RedisBackend::ArmSweeper() {
  if (!options_.run_timer) return;
  // A draw left to publish: its next chunk at once (as the embedded backend's timer does). Other
  // clients' commands still run between two chunks: each is a script call of its own.
  sweep_timer_->expires_after(std::chrono::milliseconds(drawing_ ? 0 : options_.sweep_interval_ms));
  sweep_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    Sweep([this] { ArmSweeper(); });
  });
}

void RedisBackend::Sweep(std::function<void()> done) {
  if (sweeping_) return done();
  sweeping_ = true;
  // About once a second every long poll looks again, whatever it was told: a lost message
  // (a reconnection, a process killed between a change and its PUBLISH) costs at most that.
  if (++sweep_ticks_ % 10 == 0) WakeAll();
  auto finish = [this, done] {
    sweeping_ = false;
    done();
  };
  drawing_ = false;  // until SweepOne publishes a chunk that leaves more
  home().client->Eval(sweep_script_, {keys_.Registry()}, {NowArg(), kSweepBatch},
                      [this, finish](Reply r) {
                        if (r.failed() || r.elements.empty()) return finish();
                        auto left = std::make_shared<size_t>(r.elements.size());
                        for (const Reply& m : r.elements) {
                          SweepOne(m.str, [left, finish] {
                            if (--*left == 0) finish();
                          });
                        }
                      });
}

// Advances one room or queue; then records its next deadline, and reads back the hint in
// case an operation lowered it between the two (see docs/design.md, "the registry").
void RedisBackend::SweepOne(const std::string& member, std::function<void()> done) {
  if (member.size() < 3 || (member[0] != 'r' && member[0] != 'q')) {
    home().client->Call(keys_.Registry(), {"ZREM", keys_.Registry(), member}, [](Reply) {});
    return done();
  }
  char kind = member[0];
  std::string name = member.substr(2);
  auto after = [this, member, kind, name, done](OpResult<Reply> r) {
    if (!r.ok()) {
      if (r.status() == OpStatus::kUnknownRoom) {
        home().client->Call(keys_.Registry(), {"ZREM", keys_.Registry(), member}, [](Reply) {});
      }
      return done();
    }
    int64_t next = ParseNextDeadline(*r);
    home().client->Call(keys_.Registry(), {"ZADD", keys_.Registry(), std::to_string(next), member},
                        [this, member, kind, name, done](Reply) {
                          // Its answer goes through AfterScript, which applies it with ZADD LT.
                          auto reread = [done](OpResult<Reply>) { done(); };
                          if (kind == 'r') {
                            RoomScript(home(), name, {"hint"}, reread);
                          } else {
                            QueueScript(home(), name, {"hint"}, reread);
                          }
                        });
  };
  if (kind == 'r') {
    // A draw being published gets its next chunk; the chunk's answer then stands for the
    // advance's (its next deadline, forced as the advance's is).
    RoomScript(home(), name, {"advance"}, [this, name, after](OpResult<Reply> r) {
      std::optional<DrawState> draw = r.ok() ? ParseDrawState(*r) : std::nullopt;
      if (!draw) {
        draws_.erase(name);
        return after(std::move(r));
      }
      RoomScript(home(), name, DrawChunkArgs(name, *draw), [this, name, after](OpResult<Reply> r) {
        if (r.ok() && ParseDrawState(*r)) {
          drawing_ = true;
        } else {
          if (!r.ok())
            spdlog::warn("redis: a draw of room '{}' refused a chunk: {}", name, r.message());
          draws_.erase(name);
        }
        after(std::move(r));
      });
    });
  } else {
    // Due schedules are fired first; the last firing's answer then stands for the advance's.
    QueueScript(home(), name, {"advance"}, [this, name, after](OpResult<Reply> r) {
      if (!r.ok()) return after(std::move(r));
      ScheduleRead due = ParseDueSchedules(*r);
      if (due.schedules.empty()) return after(std::move(r));
      FireDue(name, std::move(due), [after, r](std::optional<Reply> last) mutable {
        if (last) return after(OpResult<Reply>(std::move(*last)));
        after(std::move(r));
      });
    });
  }
}

std::vector<std::string> RedisBackend::DrawChunkArgs(const std::string& room, const DrawState& d) {
  const size_t chunk = std::max<size_t>(1, options_.draw_chunk);
  std::vector<std::string> argv{"draw", std::to_string(d.published), std::to_string(chunk),
                                d.shuffled ? d.seed : ""};
  if (!d.shuffled || d.people > std::numeric_limits<uint32_t>::max()) {
    draws_.erase(room);
    return argv;  // arrival order: the script takes the next `chunk` itself
  }
  core::DrawSeed seed{};
  std::copy_n(d.seed.begin(), std::min(d.seed.size(), seed.size()), seed.begin());
  auto it = draws_.find(room);
  if (it == draws_.end() || it->second.event != d.event || it->second.seed != seed ||
      it->second.shuffle.size() != d.people) {
    if (draws_.size() >= kDrawsKept) draws_.clear();
    // Rank r is the pre-queue's r-th arrival (the draw key's order in room.lua).
    std::vector<uint32_t> arrival(d.people);
    std::iota(arrival.begin(), arrival.end(), 0u);
    it = draws_
             .insert_or_assign(room,
                               DrawWork{.event = d.event,
                                        .seed = seed,
                                        .shuffle = core::FisherYates(seed, std::move(arrival))})
             .first;
  }
  core::FisherYates& shuffle = it->second.shuffle;
  // Positions below done() are final: a process that comes to a draw mid-way steps up to it
  // once, then a chunk's worth per chunk.
  const size_t to = static_cast<size_t>(std::min<uint64_t>(d.published + chunk, d.people));
  while (shuffle.done() < to) shuffle.Step(to - shuffle.done());
  argv.reserve(argv.size() + to - std::min<size_t>(to, d.published));
  for (size_t k = d.published; k < to; ++k) argv.push_back(std::to_string(shuffle.order()[k]));
  return argv;
}

void RedisBackend::RunDue() {
  std::promise<void> swept;
  asio::post(home().io, [this, &swept] {
    ExpireWaiters(clock_.NowMs());
    Sweep([&swept] { swept.set_value(); });
  });
  swept.get_future().wait();
}

// ---- the shared secret and keys ------------------------------------------------------------

void RedisBackend::WatchShared(SharedValue value) {
  asio::post(home().io,
             [this, value = std::move(value)]() mutable { shared_watch_->Add(std::move(value)); });
}

bool RedisBackend::UseTls(std::shared_ptr<asio::ssl::context> context) {
  if (!tls_) return false;
  tls_->Replace(std::move(context));
  return true;
}

}  // namespace anteroom::store::redis
