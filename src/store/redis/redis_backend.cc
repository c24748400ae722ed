#include "store/redis/redis_backend.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <stdexcept>

#include "store/redis/lua_scripts.h"
#include "store/redis/polls.h"

namespace anteroom::store::redis {

namespace asio = boost::asio;

namespace {
constexpr int64_t kNever = 9007199254740991;  // NEVER in the scripts: nothing pending
constexpr const char* kSweepBatch = "256";

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

core::RoomInfo ToInfo(const std::string& room, const Reply& a) {
  core::RoomInfo info;
  info.room = room;
  info.config.capacity = a.at(0).AsInt();
  info.config.grace_ms = a.at(1).AsInt();
  info.config.checkin_timeout_ms = a.at(2).AsInt();
  if (int64_t idle = a.at(3).AsInt(); idle >= 0) {
    info.config.idle_timeout_ms = idle;
  } else {
    info.config.idle_timeout_ms = std::nullopt;
  }
  if (int64_t apm = a.at(4).AsInt(); apm >= 0) info.config.admit_per_minute = apm;
  info.active = a.at(5).AsInt();
  info.waiting = a.at(6).AsInt();
  info.counters.admitted_total = a.at(7).AsInt();
  info.counters.dropped_total = a.at(8).AsInt();
  info.counters.released_total = a.at(9).AsInt();
  return info;
}

core::SessionView ToView(const std::string& session, const Reply& a) {
  core::SessionView v;
  v.session = session;
  const std::string& st = a.at(0).str;
  v.status = st == "waiting"  ? core::SessionStatus::kWaiting
             : st == "active" ? core::SessionStatus::kActive
             : st == "grace"  ? core::SessionStatus::kGrace
                              : core::SessionStatus::kGone;
  v.position = a.at(1).AsInt();
  v.waiting = a.at(2).AsInt();
  v.active = a.at(3).AsInt();
  v.capacity = a.at(4).AsInt();
  if (int64_t eta = a.at(5).AsInt(); eta >= 0) v.eta_ms = eta;
  v.admission = static_cast<uint64_t>(a.at(6).AsInt());
  return v;
}

// Runs `fn(done)` on `io` (from another thread) and waits for done(error); throws on error.
void RunAndWait(asio::io_context& io, int64_t timeout_ms,
                const std::function<void(std::function<void(std::string)>)>& fn) {
  auto promise = std::make_shared<std::promise<std::string>>();
  auto future = promise->get_future();
  asio::post(io, [fn, promise] {
    auto once = std::make_shared<bool>(false);
    fn([promise, once](std::string error) {
      if (*once) return;
      *once = true;
      promise->set_value(std::move(error));
    });
  });
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    throw std::runtime_error("redis: no answer within " + std::to_string(timeout_ms) + " ms");
  }
  if (std::string error = future.get(); !error.empty()) {
    throw std::runtime_error("redis: " + error);
  }
}
}  // namespace

RedisBackend::RedisBackend(const Clock& clock, RedisBackendOptions options)
    : clock_(clock),
      options_(std::move(options)),
      keys_(options_.key_prefix),
      lease_key_(options_.lease_secret),
      lease_mac_(lease_key_),
      room_script_(lua::kRoom),
      queue_script_(lua::kQueue),
      sweep_script_(lua::kSweep),
      sweep_timer_(io_) {
  std::string error;
  auto url = ParseRedisUrl(options_.url, error);
  if (!url) throw std::runtime_error(error);
  client_ = std::make_unique<Client>(io_, *url, options_.timeout_ms);
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
  try {
    RunAndWait(io_, options_.timeout_ms * 2, [this](auto done) {
      client_->Start([this, done](std::string err) {
        if (!err.empty()) return done(err);
        subscriber_ = client_->NewSubscriber();
        subscriber_->OnMessage(
            [this](const std::string&, const std::string& queue) { Wake(queue); });
        subscriber_->OnUp([this] {
          subscriber_->Command({"SUBSCRIBE", keys_.WakeChannel()}, [](Reply) {});
          // Messages may have been missed while down: every long poll looks again.
          for (auto& [queue, polls] : polls_) Wake(queue);
        });
        ArmSweeper();
        done("");
      });
    });
  } catch (...) {
    io_.stop();
    thread_.join();
    throw;
  }
}

RedisBackend::~RedisBackend() {
  std::promise<void> stopped;
  asio::post(io_, [this, &stopped] {
    sweep_timer_.cancel();
    for (auto& [queue, polls] : polls_) {
      for (auto& w : polls->waiters) {
        w->timer.cancel();
        w->done(OpResult<core::FetchAnswer>(OpStatus::kUnavailable, "the server is stopping"));
      }
    }
    polls_.clear();
    if (subscriber_) subscriber_->Close();
    client_->Close();
    stopped.set_value();
  });
  stopped.get_future().wait();
  io_.stop();
  thread_.join();
}

std::string RedisBackend::NowArg() const {
  return options_.redis_time ? std::string() : std::to_string(clock_.NowMs());
}

// ---- scripts -------------------------------------------------------------------------------

namespace {
// The reply of a script as an OpResult: its status word checked, Redis errors mapped.
OpResult<Reply> Checked(Reply r) {
  if (r.type == Reply::Type::kTransport) {
    return {OpStatus::kUnavailable, "the Redis store is unavailable: " + r.str + "; retry later"};
  }
  if (r.type == Reply::Type::kError) {
    if (IsTransient(r)) return {OpStatus::kUnavailable, "the Redis store is busy: " + r.str};
    return {OpStatus::kInternal, "redis: " + r.str};
  }
  const std::string& word = r.at(0).str;
  if (word == "ok") return OpResult<Reply>(std::move(r));
  if (word == "unknown_session") {
    return {OpStatus::kUnknownSession, "the room does not know this session"};
  }
  if (word == "invalid_argument") return {OpStatus::kInvalidArgument, r.at(1).str};
  if (word == "unknown_room") return {OpStatus::kUnknownRoom, ""};
  return {OpStatus::kInternal, "redis: unexpected answer from a script"};
}
}  // namespace

void RedisBackend::RoomScript(const std::string& room, std::vector<std::string> argv, ReplyFn k) {
  argv.insert(argv.begin() + 1, {NowArg(), std::to_string(options_.token_ttl_ms)});
  client_->Eval(room_script_, keys_.Room(room), std::move(argv), [this, room, k](Reply r) {
    AfterScript('r', room, r);
    OpResult<Reply> result = Checked(std::move(r));
    if (result.status() == OpStatus::kUnknownRoom) {
      return k({OpStatus::kUnknownRoom, "no room named '" + room + "'"});
    }
    k(std::move(result));
  });
}

void RedisBackend::QueueScript(const std::string& queue, std::vector<std::string> argv, ReplyFn k) {
  argv.insert(argv.begin() + 1, NowArg());
  client_->Eval(queue_script_, keys_.Queue(queue), std::move(argv), [this, queue, k](Reply r) {
    AfterScript('q', queue, r);
    k(Checked(std::move(r)));
  });
}

// A script answers a deadline to register (>= 0) after its status word, and queues whether
// long polls should look again.
void RedisBackend::AfterScript(char kind, const std::string& name, const Reply& reply) {
  if (reply.type != Reply::Type::kArray || reply.elements.size() < 2) return;
  const Reply& reg = reply.elements[1];
  if (reg.type == Reply::Type::kInteger && reg.integer >= 0) {
    Register(std::string(1, kind) + ":" + name, reg.integer);
  }
  if (kind == 'q' && reply.at(0).str == "ok" && reply.at(2).AsInt() == 1) Publish(name);
}

void RedisBackend::Register(const std::string& member, int64_t when) {
  client_->Call(keys_.Registry(), {"ZADD", keys_.Registry(), "LT", std::to_string(when), member},
                [this](Reply r) {
                  if (r.failed() && !client_->closed())
                    spdlog::warn("redis: could not update the registry: {}", r.str);
                });
}

void RedisBackend::Publish(const std::string& queue) {
  client_->Call("", {"PUBLISH", keys_.WakeChannel(), queue}, [](Reply) {});
}

// ---- rooms ---------------------------------------------------------------------------------

void RedisBackend::PutRoom(std::string room, core::RoomPatch patch,
                           Completion<core::RoomInfo> done) {
  Post([this, room = std::move(room), patch, done = std::move(done)] {
    RoomScript(room,
               {"put", Opt(patch.capacity), Opt(patch.grace_ms), Opt(patch.checkin_timeout_ms),
                OptNone(patch.idle_timeout_ms), OptNone(patch.admit_per_minute)},
               [room, done](OpResult<Reply> r) {
                 if (!r.ok()) return done({r.status(), r.message()});
                 done(ToInfo(room, r->at(2)));
               });
  });
}

void RedisBackend::GetRoom(std::string room, Completion<core::RoomInfo> done) {
  Post([this, room = std::move(room), done = std::move(done)] {
    RoomScript(room, {"get"}, [room, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ToInfo(room, r->at(2)));
    });
  });
}

void RedisBackend::DeleteRoom(std::string room, Completion<core::RoomInfo> done) {
  Post([this, room = std::move(room), done = std::move(done)] {
    RoomScript(room, {"delete"}, [this, room, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      client_->Call(keys_.Registry(), {"ZREM", keys_.Registry(), "r:" + room}, [](Reply) {});
      done(ToInfo(room, r->at(2)));
    });
  });
}

// Rooms are listed from the registry, then read one by one (each in its own slot).
void RedisBackend::ListRooms(Completion<std::vector<core::RoomInfo>> done) {
  Post([this, done = std::move(done)] {
    client_->Call(keys_.Registry(), {"ZRANGE", keys_.Registry(), "0", "-1"}, [this, done](Reply r) {
      if (r.failed()) {
        OpResult<Reply> failed = Checked(std::move(r));
        return done({failed.status(), failed.message()});
      }
      struct Gather {
        std::vector<core::RoomInfo> rooms;
        size_t left = 0;
        std::optional<std::string> failure;
      };
      auto g = std::make_shared<Gather>();
      std::vector<std::string> names;
      for (const Reply& m : r.elements) {
        if (m.str.starts_with("r:")) names.push_back(m.str.substr(2));
      }
      g->left = names.size();
      auto finish = [g, done] {
        if (g->failure) return done({OpStatus::kUnavailable, *g->failure});
        std::sort(g->rooms.begin(), g->rooms.end(),
                  [](const auto& a, const auto& b) { return a.room < b.room; });
        done(std::move(g->rooms));
      };
      if (names.empty()) return finish();
      for (const std::string& name : names) {
        RoomScript(name, {"get"}, [g, name, finish](OpResult<Reply> rr) {
          if (rr.ok()) {
            g->rooms.push_back(ToInfo(name, rr->at(2)));
          } else if (rr.status() != OpStatus::kUnknownRoom) {
            g->failure = rr.message();
          }
          if (--g->left == 0) finish();
        });
      }
    });
  });
}

void RedisBackend::Check(std::string room, std::string session,
                         Completion<core::SessionView> done) {
  Post([this, room = std::move(room), session = std::move(session), done = std::move(done)] {
    RoomScript(room, {"check", session}, [session, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ToView(session, r->at(2)));
    });
  });
}

void RedisBackend::Touch(std::string room, std::string session,
                         Completion<core::SessionView> done) {
  Post([this, room = std::move(room), session = std::move(session), done = std::move(done)] {
    RoomScript(room, {"touch", session}, [session, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ToView(session, r->at(2)));
    });
  });
}

void RedisBackend::Leave(std::string room, std::string session, bool final,
                         Completion<core::SessionView> done) {
  Post([this, room = std::move(room), session = std::move(session), final, done = std::move(done)] {
    RoomScript(room, {"leave", session, final ? "1" : "0"}, [session, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ToView(session, r->at(2)));
    });
  });
}

void RedisBackend::EndSession(std::string room, std::string session,
                              Completion<core::SessionView> done) {
  Post([this, room = std::move(room), session = std::move(session), done = std::move(done)] {
    RoomScript(room, {"evict", session}, [session, done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(ToView(session, r->at(2)));
    });
  });
}

void RedisBackend::IsRevoked(std::string room, std::string session, uint64_t admission,
                             Completion<bool> done) {
  Post([this, room = std::move(room), session = std::move(session), admission,
        done = std::move(done)] {
    RoomScript(room, {"revoked", session, std::to_string(admission)}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done({r.status(), r.message()});
      done(r->at(2).AsInt() == 1);
    });
  });
}

// ---- sweeping ------------------------------------------------------------------------------

void RedisBackend::ArmSweeper() {
  if (!options_.run_timer) return;
  sweep_timer_.expires_after(std::chrono::milliseconds(options_.sweep_interval_ms));
  sweep_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    Sweep([this] { ArmSweeper(); });
  });
}

void RedisBackend::Sweep(std::function<void()> done) {
  if (sweeping_) return done();
  sweeping_ = true;
  // About once a second every long poll looks again, whatever it was told: a lost message
  // (a reconnection, a process killed between a change and its PUBLISH) costs at most that.
  if (++sweep_ticks_ % 10 == 0) {
    for (auto& [queue, polls] : polls_) Wake(queue);
  }
  auto finish = [this, done] {
    sweeping_ = false;
    done();
  };
  client_->Eval(sweep_script_, {keys_.Registry()}, {NowArg(), kSweepBatch},
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
    client_->Call(keys_.Registry(), {"ZREM", keys_.Registry(), member}, [](Reply) {});
    return done();
  }
  char kind = member[0];
  std::string name = member.substr(2);
  auto after = [this, member, kind, name, done](OpResult<Reply> r) {
    if (!r.ok()) {
      if (r.status() == OpStatus::kUnknownRoom) {
        client_->Call(keys_.Registry(), {"ZREM", keys_.Registry(), member}, [](Reply) {});
      }
      return done();
    }
    int64_t next = r->at(1).AsInt();
    client_->Call(keys_.Registry(), {"ZADD", keys_.Registry(), std::to_string(next), member},
                  [this, member, kind, name, done](Reply) {
                    // Its answer goes through AfterScript, which applies it with ZADD LT.
                    auto reread = [done](OpResult<Reply>) { done(); };
                    if (kind == 'r') {
                      RoomScript(name, {"hint"}, reread);
                    } else {
                      QueueScript(name, {"hint"}, reread);
                    }
                  });
  };
  if (kind == 'r') {
    RoomScript(name, {"advance"}, after);
  } else {
    QueueScript(name, {"advance"}, after);
  }
}

void RedisBackend::RunDue() {
  std::promise<void> swept;
  Post([this, &swept] {
    ExpireWaiters(clock_.NowMs());
    Sweep([&swept] { swept.set_value(); });
  });
  swept.get_future().wait();
}

// ---- the shared secret ---------------------------------------------------------------------

std::string RedisBackend::SharedSecret(const std::string& url_text, const std::string& prefix,
                                       const std::string& candidate) {
  std::string error;
  auto url = ParseRedisUrl(url_text, error);
  if (!url) throw std::runtime_error(error);
  asio::io_context io;
  Client client(io, *url, 5000);
  KeyLayout keys(prefix);
  std::string secret, problem = "no answer from redis within 10 s";
  client.Start([&](std::string err) {
    if (!err.empty()) {
      problem = err;
      return io.stop();
    }
    // SET NX then GET: whoever comes first sets it; every process reads the same one.
    client.Call(keys.Secret(), {"SET", keys.Secret(), candidate, "NX"}, [&](Reply) {
      client.Call(keys.Secret(), {"GET", keys.Secret()}, [&](Reply r) {
        if (r.type == Reply::Type::kString) {
          secret = r.str;
          problem.clear();
        } else {
          problem = r.failed() ? r.str : "the secret key holds no string";
        }
        io.stop();
      });
    });
  });
  io.run_for(std::chrono::seconds(10));
  client.Close();
  io.restart();
  io.poll();
  if (!problem.empty())
    throw std::runtime_error("redis: cannot read the shared secret: " + problem);
  return secret;
}

}  // namespace anteroom::store::redis
