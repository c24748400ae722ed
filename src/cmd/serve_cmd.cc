// `anteroom serve`: wires clock, backend, token signer, router and HTTP server together.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cmd/commands.h"
#include "cmd/config_file.h"
#include "cmd/log_format.h"
#include "cmd/serve_flags.h"
#include "cmd/serve_reload.h"
#include "cmd/service_notify.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/random_id.h"
#include "core/token.h"
#include "http/body_budget.h"
#include "http/fd_limit.h"
#include "http/http_server.h"
#include "http/origin_policy.h"
#include "http/tls_context.h"
#include "server/backup_exports.h"
#include "server/eta_tracer.h"
#include "server/event_feed.h"
#include "server/families.h"
#include "server/gate_cache.h"
#include "server/live_hub.h"
#include "server/queue_keys.h"
#include "server/stats_history.h"
#include "server/webhook_dispatcher.h"
#include "server/webhook_worker.h"
#include "store/log/embedded_store.h"
#include "store/memory/memory_backend.h"
#include "store/redis/redis_backend.h"

namespace anteroom::cmd {

namespace {

store::log::FsyncPolicy ParsePolicy(const std::string& name) {
  if (name == "always") return store::log::FsyncPolicy::kAlways;
  if (name == "no") return store::log::FsyncPolicy::kNo;
  return store::log::FsyncPolicy::kEverySec;
}

std::pair<std::string, uint16_t> SplitHostPort(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("--listen wants HOST:PORT");
  int port = std::stoi(listen.substr(colon + 1));
  if (port < 0 || port > 65535) throw std::runtime_error("--listen: port out of range");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, static_cast<uint16_t>(port)};
}

store::redis::RedisTlsFiles RedisTls(const ServeFlags& flags) {
  return {flags.redis_tls_ca, flags.redis_tls_cert, flags.redis_tls_key};
}

// With --store, how long a process that finds the shared secret (or key) missing while Redis
// holds rooms or queues waits for a running process to put it back: two of their checks.
int64_t RestoreWaitMs(const ServeFlags& flags) { return 2 * flags.redis_secret_check_ms + 1000; }

// The token secret with --store: the one every process on the Redis shares, so a token, a lease
// or a puzzle from one verifies on all (docs/security.md, "The token secret with Redis"). Start-up
// fails rather than run with a secret that differs from the others', or mint a second one
// silently when Redis lost it.
std::string RedisTokenSecret(const ServeFlags& flags, const std::string& configured) {
  using Outcome = store::redis::Claimed::Outcome;
  std::string key = store::redis::KeyLayout(flags.redis_prefix).Secret();
  if (configured.empty()) {
    spdlog::warn(
        "ANTEROOM_TOKEN_SECRET is not set: using the token secret kept in Redis ({}); should "
        "Redis lose it (a restart without persistence, an eviction, FLUSHALL), what was signed "
        "with it stops verifying. Set ANTEROOM_TOKEN_SECRET (and --token-key with EdDSA/ES256) on "
        "every process of a Redis deployment (docs/security.md)",
        key);
  }
  int64_t wait_ms = RestoreWaitMs(flags);
  store::redis::Claimed claimed =
      store::redis::ClaimShared(flags.store, flags.redis_prefix,
                                {.key = key,
                                 .value = configured.empty() ? RandomBytes(32) : configured,
                                 .what = "token secret"},
                                {.configured = !configured.empty(),
                                 .restore_wait_ms = wait_ms,
                                 .mint_when_lost = flags.accept_new_token_secret,
                                 .tls = RedisTls(flags)});
  switch (claimed.outcome) {
    case Outcome::kDiffers:
      throw std::runtime_error(fmt::format(
          "ANTEROOM_TOKEN_SECRET differs from the token secret the processes on this Redis share "
          "({}): tokens, leases and puzzles would not verify between them. Give every process "
          "the same ANTEROOM_TOKEN_SECRET; if no process uses the one in Redis any more, DEL {} "
          "and start again (docs/security.md)",
          key, key));
    case Outcome::kLost:
      throw std::runtime_error(fmt::format(
          "Redis holds rooms or queues (prefix '{}') but not their token secret {}: it was lost "
          "(a restart without persistence, an eviction, FLUSHALL or DEL) and no running process "
          "put it back within {} ms. A new secret would make every token, lease and puzzle made "
          "with the old one fail, so none is made. To recover: start with ANTEROOM_TOKEN_SECRET "
          "set to the old secret (or SET {} back from a backup); or, accepting the loss, start "
          "once with --accept-new-token-secret (outstanding tokens and puzzles fail, leased jobs "
          "are delivered again when their leases expire). See docs/security.md",
          flags.redis_prefix, key, wait_ms, key));
    case Outcome::kMinted:
      spdlog::warn(
          "--accept-new-token-secret: {} was lost; a new token secret is in use: tokens and "
          "puzzles made with the old one fail, and jobs leased under it are delivered again when "
          "their leases expire",
          key);
      break;
    case Outcome::kRestored:
      spdlog::info("a running process put {} back: using it", key);
      break;
    case Outcome::kFound:
    case Outcome::kCreated:
      if (!configured.empty()) spdlog::info("ANTEROOM_TOKEN_SECRET is the one in Redis ({})", key);
      break;
  }
  return claimed.value;
}

// The EdDSA/ES256 signing key with --store and no --token-key: the one every process on the
// Redis shares (PEM). A key lost while Redis holds rooms or queues is replaced, after waiting
// for a running process to put it back, with a warning: tokens signed with it fail (the secret,
// which keys leases and puzzles too, is never replaced so).
std::string RedisTokenKey(const ServeFlags& flags, const std::string& candidate) {
  using Outcome = store::redis::Claimed::Outcome;
  std::string key = store::redis::KeyLayout(flags.redis_prefix).TokenKey(flags.token_alg);
  spdlog::info("--token-key is not set: using the {} key kept in Redis ({})", flags.token_alg, key);
  int64_t wait_ms = RestoreWaitMs(flags);
  store::redis::Claimed claimed = store::redis::ClaimShared(
      flags.store, flags.redis_prefix,
      {.key = key, .value = candidate, .what = flags.token_alg + " signing key"},
      {.restore_wait_ms = wait_ms, .mint_when_lost = true, .tls = RedisTls(flags)});
  if (claimed.outcome == Outcome::kMinted) {
    spdlog::warn(
        "{} was missing while Redis holds rooms or queues, and no running process put it back "
        "within {} ms: a new {} key signs from now on, and tokens signed with a lost one fail "
        "(expected once when --token-alg changes on a deployment that has rooms)",
        key, wait_ms, flags.token_alg);
  } else if (claimed.outcome == Outcome::kRestored) {
    spdlog::info("a running process put {} back: using it", key);
  }
  return claimed.value;
}

std::string TokenSecret(const ServeFlags& flags) {
  const std::string& configured = flags.token_secret;  // $ANTEROOM_TOKEN_SECRET or its file
  if (!flags.store.empty()) return RedisTokenSecret(flags, configured);
  if (!configured.empty()) return configured;
  // With a data directory the secret lives there, so tokens and leases outlive restarts.
  if (!flags.memory_only) {
    spdlog::info("ANTEROOM_TOKEN_SECRET is not set: using the secret kept in {}/secret",
                 flags.data);
    return store::log::LoadOrCreateSecret(flags.data);
  }
  spdlog::warn(
      "ANTEROOM_TOKEN_SECRET is not set: using a random secret; tokens will not verify after a "
      "restart or on other processes");
  return RandomBytes(32);
}

std::string ReadKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<const core::TokenKey> KeyFromPem(const std::string& pem, const std::string& where) {
  auto key = core::TokenKey::FromPem(pem);
  if (!key.ok()) throw std::runtime_error(where + ": " + key.message());
  return *key;
}

// The token keys: the signing key first, then the keys kept for verification only (the
// secret's HS256 key, so tokens minted before a switch of --token-alg still verify, and every
// --token-verify-key). *shared_pem: the signing key when it is the one shared through Redis.
std::vector<std::shared_ptr<const core::TokenKey>> TokenKeys(const ServeFlags& flags,
                                                             const std::string& secret,
                                                             std::string* shared_pem) {
  core::TokenAlg alg = *core::ParseTokenAlg(flags.token_alg);
  std::vector<std::shared_ptr<const core::TokenKey>> keys;
  auto hs256 = core::TokenKey::Secret(secret);
  if (alg == core::TokenAlg::kHS256) {
    if (!flags.token_key.empty()) throw std::runtime_error("--token-key wants EdDSA or ES256");
    keys.push_back(hs256);
  } else {
    std::string name = alg == core::TokenAlg::kEdDSA ? "token-eddsa.pem" : "token-es256.pem";
    auto generate = [alg] { return core::TokenKey::Generate(alg)->PrivatePem(); };
    std::string pem, where;
    if (!flags.token_key.empty()) {
      where = flags.token_key;
      pem = ReadKeyFile(flags.token_key);
    } else if (!flags.store.empty()) {
      // Every process on this Redis signs with the same key (set once, SET NX).
      where = store::redis::KeyLayout(flags.redis_prefix).TokenKey(flags.token_alg);
      pem = RedisTokenKey(flags, generate());
      *shared_pem = pem;
    } else if (!flags.memory_only) {
      where = flags.data + "/" + name;
      spdlog::info("--token-key is not set: using the {} key kept in {}", flags.token_alg, where);
      pem = store::log::LoadOrCreateFile(flags.data, name, generate);
    } else {
      spdlog::warn(
          "--token-key is not set: using a random {} key; tokens will not verify after a "
          "restart or on other processes",
          flags.token_alg);
      where = "a generated key";
      pem = generate();
    }
    auto key = KeyFromPem(pem, where);
    if (!key->can_sign()) throw std::runtime_error(where + ": a private key is needed to sign");
    if (key->alg() != alg) {
      throw std::runtime_error(where + ": not a key for " + flags.token_alg);
    }
    keys.push_back(key);
    keys.push_back(hs256);
  }
  for (const std::string& file : flags.token_verify_keys) {
    keys.push_back(KeyFromPem(ReadKeyFile(file), file));
  }
  spdlog::info("tokens: {} signed with key {}; {} more key(s) verify", flags.token_alg,
               keys.front()->kid(), keys.size() - 1);
  return keys;
}

// What the HTTP edge is told before anything opens, so a bad --templates, --trusted-proxy or
// --cors-origin fails start-up at once.
struct Edge {
  server::WebOptions web;
  http::TrustedProxies trusted;
  std::shared_ptr<http::OriginPolicy> origins;
};

Edge EdgeFromFlags(const ServeFlags& flags) {
  Edge edge;
  edge.web = WebOptionsFromFlags(flags);
  for (const std::string& cidr : flags.trusted_proxies) {
    std::string error;
    if (!edge.trusted.Add(cidr, &error)) throw std::runtime_error("--trusted-proxy: " + error);
  }
  edge.origins = std::make_shared<http::OriginPolicy>(http::OriginPolicyOptions{
      .cors_origins = flags.cors_origins, .trusted_proxies = edge.trusted});
  return edge;
}

// The webhook sender's settings; a bad --webhook-allow or CA file fails start-up at once.
webhook::WebhookSenderOptions WebhookOptionsFromFlags(const ServeFlags& flags) {
  std::string error;
  auto allow = webhook::WebhookAllowList::Parse(flags.webhook_allow, error);
  if (!allow) throw std::runtime_error("--webhook-allow: " + error);
  webhook::WebhookSenderOptions options;
  options.allow = std::move(*allow);
  options.timeout_ms = flags.webhook_timeout_ms;
  options.ca_file = flags.webhook_ca_file;
  return options;
}

// The admin key and the queue key, and a line saying who may call what with them.
http::AccessKeys AccessKeysFromFlags(const ServeFlags& flags) {
  http::AccessKeys keys;
  keys.admin_key = flags.admin_key;  // settled from $ANTEROOM_ADMIN_KEY or admin_key_file
  keys.queue_key = flags.queue_key;
  switch (http::QueueAccessOf(keys)) {
    case http::QueueAccess::kOpen:
      spdlog::warn(
          "no admin key and no queue key: every route is open to anyone who can reach {} "
          "(set ANTEROOM_ADMIN_KEY and ANTEROOM_QUEUE_KEY; docs/security.md)",
          flags.listen);
      break;
    case http::QueueAccess::kAdminKey:
      spdlog::info(
          "access: admin routes and queue routes need the admin key (no queue key set); room "
          "routes are public");
      break;
    case http::QueueAccess::kQueueKey:
      spdlog::info(
          "access: queue routes need the queue key or the admin key; admin routes {}; "
          "room routes are public",
          keys.admin_key.empty() ? "are OPEN (no admin key set)" : "need the admin key");
      break;
  }
  return keys;
}

// With a data directory it is locked before anything in it (the secret) is read; the
// embedded store takes the lock again for its lifetime.
std::string SecretFromFlags(const ServeFlags& flags) {
  std::optional<store::log::DirLock> lock;
  if (!flags.memory_only && flags.store.empty()) lock.emplace(flags.data);
  return TokenSecret(flags);
}

store::redis::RedisBackendOptions RedisOptions(const ServeFlags& flags, const std::string& secret,
                                               std::vector<boost::asio::io_context*> contexts) {
  return {.url = flags.store,
          .tls = RedisTls(flags),
          .key_prefix = flags.redis_prefix,
          .token_ttl_ms = flags.token_ttl_ms,
          .lease_secret = "anteroom/leases/" + secret,
          .max_rooms = flags.max_rooms,
          .max_queues = flags.max_queues,
          .contexts = std::move(contexts),
          .max_clients_per_room = flags.max_clients_per_room,
          .shared_check_ms = flags.redis_secret_check_ms};
}

// The one backend `serve` runs on: state in Redis (--store), or in memory, made durable by the
// data directory unless --memory-only.
class ServedBackend {
 public:
  ServedBackend(const ServeFlags& flags, const Clock& clock, http::IoPool& pool,
                const std::string& secret) {
    if (!flags.store.empty()) {
      redis_ = std::make_unique<store::redis::RedisBackend>(
          clock, RedisOptions(flags, secret, pool.Contexts()));
      return;
    }
    memory_ = std::make_unique<store::MemoryBackend>(
        clock, store::MemoryBackendOptions{.token_ttl_ms = flags.token_ttl_ms,
                                           .lease_secret = "anteroom/leases/" + secret,
                                           .run_timer = true,
                                           .max_rooms = flags.max_rooms,
                                           .max_queues = flags.max_queues,
                                           .max_clients_per_room = flags.max_clients_per_room,
                                           .draw_chunk = flags.draw_chunk});
    if (flags.memory_only) return;
    durable_.emplace(*memory_, store::log::EmbeddedOptions{
                                   .dir = flags.data,
                                   .fsync = ParsePolicy(flags.fsync),
                                   .compact_min_bytes = flags.compact_min_mb << 20,
                               });
    const auto& r = durable_->recovery();
    spdlog::info(
        "data directory {}: recovered snapshot {} ({} bytes) and {} records from {} segments in "
        "{:.3f} s; fsync {}",
        flags.data, r.snapshot, r.snapshot_bytes, r.records, r.segments.size(), r.seconds,
        flags.fsync);
  }

  store::Backend& get() { return redis_ ? static_cast<store::Backend&>(*redis_) : *memory_; }
  store::redis::RedisBackend* redis() { return redis_.get(); }
  store::log::EmbeddedStore* durable() { return durable_ ? &*durable_ : nullptr; }

 private:
  std::unique_ptr<store::MemoryBackend> memory_;
  std::unique_ptr<store::redis::RedisBackend> redis_;
  std::optional<store::log::EmbeddedStore> durable_;  // declared after memory_: stops first
};

// Every process keeps the shared secret and signing key in Redis: put back when Redis loses
// them; a process whose values differ from Redis's is not ready.
void WatchSharedSecrets(const ServeFlags& flags, store::redis::RedisBackend& redis,
                        const std::string& secret, const std::string& shared_pem) {
  store::redis::KeyLayout layout(flags.redis_prefix);
  redis.WatchShared({.key = layout.Secret(), .value = secret, .what = "token secret"});
  if (!shared_pem.empty()) {
    redis.WatchShared({.key = layout.TokenKey(flags.token_alg),
                       .value = shared_pem,
                       .what = flags.token_alg + " signing key"});
  }
}

// Demo rooms are made before serving. The Redis backend runs on the pool's threads, which do
// not run yet: a short-lived one on a thread of its own makes them.
void MakeDemoRooms(const ServeFlags& flags, const Clock& clock, const std::string& secret,
                   store::Backend& backend) {
  if (flags.demo_rooms.empty()) return;
  std::unique_ptr<store::redis::RedisBackend> setup;
  if (!flags.store.empty()) {
    store::redis::RedisBackendOptions options = RedisOptions(flags, secret, {});
    options.run_timer = false;
    setup = std::make_unique<store::redis::RedisBackend>(clock, std::move(options));
  }
  store::Backend& maker = setup ? static_cast<store::Backend&>(*setup) : backend;
  for (const std::string& demo : flags.demo_rooms) {
    size_t colon = demo.rfind(':');
    std::string name = demo.substr(0, colon);
    if (colon == std::string::npos || !IsValidName(name)) {
      throw std::runtime_error("--demo-room wants NAME:CAPACITY, got '" + demo + "'");
    }
    core::RoomPatch patch;
    patch.capacity = std::stoll(demo.substr(colon + 1));
    patch.target_url = std::optional<std::string>("/demo");  // web/demo.html
    std::promise<OpResult<core::RoomInfo>> created;
    maker.PutRoom(name, patch, [&](OpResult<core::RoomInfo> r) { created.set_value(r); });
    if (auto r = created.get_future().get(); !r.ok()) {
      throw std::runtime_error("--demo-room: " + r.message());
    }
  }
}

http::ConnectionLimits ConnectionLimitsFromFlags(const ServeFlags& flags) {
  http::FdFit fds = http::FitConnectionsToFds(flags.max_connections);
  return {
      .max_connections = fds.max_connections,
      // Refusals use the descriptors kept beyond the cap: half of them at most.
      .max_refusing = std::min<size_t>(256, (fds.soft_limit - fds.max_connections) / 2),
      .head_timeout = std::chrono::milliseconds(flags.head_timeout_ms),
      .idle_timeout = std::chrono::milliseconds(flags.idle_timeout_ms),
      .body_stall = std::chrono::milliseconds(flags.body_stall_ms),
      .min_body_rate = flags.min_body_rate,
      .max_buffered_bytes = flags.max_buffered_mb << 20,
  };
}

// Pages of a room's site may call the room API: the rooms of every process (Redis), within
// one sampling interval.
void AllowRoomOrigins(server::StatsSampler& sampler, std::shared_ptr<http::OriginPolicy> origins) {
  sampler.OnRooms([origins](const std::vector<core::RoomInfo>& rooms) {
    std::map<std::string, std::string> targets;
    for (const core::RoomInfo& room : rooms) {
      if (!room.config.target_url) continue;
      if (auto origin = http::OriginOfUrl(*room.config.target_url)) {
        targets.emplace(room.room, std::move(*origin));
      }
    }
    origins->SetRooms(std::move(targets));
  });
}

// SIGUSR1 writes a snapshot now (as Redis's BGSAVE), e.g. before a backup; SIGHUP re-reads
// what can change without a restart (serve_reload.h); SIGINT and SIGTERM drain the server, and
// a second one stops it at once. Lives until the pool stops running.
class ServeSignals {
 public:
  ServeSignals(boost::asio::io_context& io, store::log::EmbeddedStore* durable,
               std::function<void()> reload, std::function<void()> drain,
               std::function<void()> stop)
      : snapshot_(io, SIGUSR1),
        reload_(io, SIGHUP),
        stop_(io, SIGINT, SIGTERM),
        durable_(durable),
        on_reload_(std::move(reload)) {
    ArmSnapshot();
    ArmReload();
    stop_.async_wait([this, drain = std::move(drain), stop = std::move(stop)](
                         const boost::system::error_code& ec, int sig) {
      if (ec) return;
      spdlog::info("signal {}: draining (a second one stops at once)", sig);
      snapshot_.cancel();
      reload_.cancel();
      stop_.async_wait([stop](const boost::system::error_code& again, int sig2) {
        if (again) return;
        spdlog::warn("signal {}: stopping now", sig2);
        stop();
      });
      drain();
    });
  }

 private:
  void ArmReload() {
    reload_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      spdlog::info("SIGHUP: reloading");
      on_reload_();
      ArmReload();
    });
  }

  void ArmSnapshot() {
    snapshot_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (durable_) {
        spdlog::info("SIGUSR1: compacting now");
        durable_->RequestCompaction();
      }
      ArmSnapshot();
    });
  }

  boost::asio::signal_set snapshot_;
  boost::asio::signal_set reload_;
  boost::asio::signal_set stop_;
  store::log::EmbeddedStore* durable_;
  std::function<void()> on_reload_;
};

// SIGTERM: the listener closes and every connection ends as its client can carry on from
// (http/drain_list.h); the server stops when none is left, or at --drain-timeout-ms, whichever
// comes first. Parked long polls are answered by the backend, which runs until then.
class Drain {
 public:
  Drain(boost::asio::io_context& io, http::HttpServer& server, std::chrono::milliseconds bound,
        std::function<void()> stop)
      : timer_(io), server_(server), bound_(bound), stop_(std::move(stop)) {}

  void Begin() {
    started_ = std::chrono::steady_clock::now();
    spdlog::info("draining {} connection(s), for up to {} ms", server_.OpenConnections(),
                 bound_.count());
    server_.Drain();
    Check();
  }

 private:
  void Check() {
    auto waited = std::chrono::steady_clock::now() - started_;
    size_t open = server_.OpenConnections();
    if (open == 0 || waited >= bound_) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
      if (open == 0) {
        spdlog::info("drained in {} ms", ms);
      } else {
        spdlog::warn("drain bound reached after {} ms: {} connection(s) still open are closed", ms,
                     open);
      }
      return stop_();
    }
    timer_.expires_after(kCheckEvery);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Check();
    });
  }

  static constexpr auto kCheckEvery = std::chrono::milliseconds(10);
  boost::asio::steady_timer timer_;
  http::HttpServer& server_;
  std::chrono::milliseconds bound_;
  std::function<void()> stop_;
  std::chrono::steady_clock::time_point started_;
};

void Serve(const ServeFlags& flags, const std::vector<std::string>& args) {
  auto [host, port] = SplitHostPort(flags.listen);
  Edge edge = EdgeFromFlags(flags);
  http::AccessKeys keys = AccessKeysFromFlags(flags);

  unsigned threads =
      flags.threads ? flags.threads : std::max(1u, std::thread::hardware_concurrency());
  // The pool outlives the backend: parked long polls hold connections whose sockets belong to
  // the pool's io_contexts, and the backend's timer may still answer them while it stops.
  http::IoPool pool(threads);
  ServiceNotifier service(pool);
  SystemClock clock;
  bool redis = !flags.store.empty();
  std::string secret = SecretFromFlags(flags);
  ServedBackend served(flags, clock, pool, secret);
  store::Backend& backend = served.get();
  std::string shared_pem;  // the signing key kept in Redis, if any
  core::TokenSigner signer(TokenKeys(flags, secret, &shared_pem), secret, flags.token_ttl_ms);
  if (served.redis()) WatchSharedSecrets(flags, *served.redis(), secret, shared_pem);

  auto tls = TlsFromFlags(flags);
  if (tls) spdlog::info("TLS certificate: {}", http::DescribeCertificate(*tls));
  http::Router router(std::move(keys));
  router.RequireClientCertificates(!flags.tls_client_ca.empty());
  if (tls) router.http_metrics().SetTlsCertificateExpiry(http::CertificateExpiry(*tls));
  router.SetOriginPolicy(edge.origins);
  auto queue_keys = std::make_shared<server::QueueKeys>(backend, clock);
  server::GateCache gate(backend, clock);
  router.SetQueueKeys(queue_keys);
  server::LiveHub live(backend, signer, clock, pool.Main(),
                       server::LiveHubOptions{
                           .tick_ms = flags.live_tick_ms,
                           .chunk = static_cast<size_t>(flags.live_chunk),
                           // On Redis each read of a moved line is a whole-line script, made by
                           // every process: once a tick.
                           .reread_ms = redis ? flags.live_tick_ms : int64_t{100},
                       });
  server::EventFeed events(backend, pool.Main(), server::EventFeedOptions{});
  webhook::WebhookSender webhook_sender(pool.Main(), WebhookOptionsFromFlags(flags));
  server::WebhookDispatcher webhook_dispatcher(backend, pool.Main());
  server::WebhookWorker webhook_worker(backend, clock, pool.Main(), webhook_sender,
                                       "anteroom-" + NewRandomId());
  server::StatsHistory history(flags.stats_interval_ms);
  server::EtaTracer eta_tracer(clock,
                               server::EtaTracerOptions{.sample_every_ms = flags.eta_sample_ms});
  server::EtaEventReader eta_reader(backend, pool.Main(), eta_tracer);
  core::PowPuzzles puzzles(secret);  // every process sharing the secret checks the others'
  // Backups of the data directory (`anteroom backup`): after the backend, so gone before it.
  std::optional<server::BackupExports> backups;
  if (served.durable()) backups.emplace(*served.durable());
  server::Services services{
      backend, signer, clock, &live, &history, std::move(edge.web), std::move(edge.trusted),
      &puzzles};
  services.origins = edge.origins.get();
  services.queue_keys = queue_keys.get();
  services.gate = &gate;
  services.events = &events;
  services.webhooks = &webhook_dispatcher;
  services.eta = &eta_tracer;
  services.backups = backups ? &*backups : nullptr;
  server::RegisterAllRoutes(router, services);
  MakeDemoRooms(flags, clock, secret, backend);

  http::ReturnBigBlocksToTheSystem();
  http::HttpServer http_server(
      pool, router, ConnectionLimitsFromFlags(flags),
      http::LiveStreamOptions{.heartbeat = std::chrono::milliseconds(flags.live_heartbeat_ms)});
  http_server.UseTls(tls);
  live.Start();
  events.Start();
  webhook_dispatcher.Start();
  webhook_worker.Start();
  eta_reader.Start();
  // Declared after the backend, so it stops (and is gone) before the backend.
  server::StatsSampler sampler(pool.Main(), backend, clock, history, &eta_tracer);
  AllowRoomOrigins(sampler, edge.origins);
  sampler.Start();
  // Before the listening line: a SIGTERM sent as soon as it appears is handled (once the pool
  // runs), not fatal.
  ServeReloader reloader(args, {.server = http_server,
                                .router = router,
                                .origins = *edge.origins,
                                .web = services.web,
                                .redis = served.redis()});
  auto stop = [&] {
    live.Stop();
    events.Stop();
    webhook_dispatcher.Stop();
    webhook_worker.Stop();
    eta_reader.Stop();
    sampler.Stop();
    pool.Stop();
  };
  Drain drain(pool.Main(), http_server, std::chrono::milliseconds(flags.drain_timeout_ms), stop);
  ServeSignals signals(
      pool.Main(), served.durable(), [&] { reloader.Reload(); },
      [&] {
        service.Stopping("draining");
        drain.Begin();
      },
      stop);
  auto bound = http_server.Listen(host, port);
  std::string url = fmt::format("{}://{}:{}", tls ? "https" : "http", host, bound.port());
  if (flags.log_format == "json") {
    fmt::print("{}\n", JsonLogLine("info", "anteroom listening on " + url, {{"url", url}}));
  } else {
    fmt::print("anteroom listening on {}\n", url);
  }
  std::fflush(stdout);
  std::string serving = fmt::format(
      "serving on {}:{}{} with {} threads, {}", host, bound.port(), tls ? " (TLS)" : "", threads,
      redis               ? "state in Redis at " + MaskUrlPassword(flags.store)
      : flags.memory_only ? "state in memory only (lost at exit)"
                          : "embedded durable backend in " + flags.data);
  spdlog::info("{}", serving);
  service.Ready(serving);

  pool.Run();
}

}  // namespace

void AddServeCommand(CLI::App& app, const std::vector<std::string>& argv) {
  // What followed `serve` on the command line: SIGHUP reads it again with the config file.
  std::vector<std::string> args;
  auto at = std::find(argv.begin(), argv.end(), "serve");
  if (at != argv.end()) args.assign(at + 1, argv.end());
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand("serve", "Run the server (embedded backend)");
  AddServeFlags(*serve, *flags);
  serve->callback([flags, serve, args] {
    ServeSettings settings = SettleServeFlags(*serve, *flags);
    if (!settings.ok()) throw std::runtime_error(settings.ErrorText());
    UseLogFormat(flags->log_format, flags->log_level);
    for (const std::string& warning : settings.warnings) spdlog::warn("{}", warning);
    if (!settings.file.empty()) spdlog::info("settings from {}", settings.file);
    Serve(*flags, args);
  });
}

}  // namespace anteroom::cmd
