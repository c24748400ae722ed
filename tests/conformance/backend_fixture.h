#pragma once
// What every conformance suite shares: the backends under test (each with a clock the test
// controls) and a fixture that calls the callback API and waits for its answer. To add a
// backend, add a factory to Backends() below; every suite runs against it.

#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/op_status.h"
#include "redis_servers.h"
#include "store/backend.h"
#include "store/log/embedded_store.h"
#include "store/memory/memory_backend.h"
#include "store/redis/redis_backend.h"

namespace anteroom::store::conformance {

// What a test may set on the backend under test (the defaults: no caps).
struct HarnessOptions {
  size_t max_queues = 0;  // --max-queues
};

// One backend under test, with a clock the test controls.
class Harness {
 public:
  virtual ~Harness() = default;
  virtual Backend& backend() = 0;
  // Moves time forward and lets the backend's timer run whatever fell due.
  virtual void AdvanceTime(int64_t ms) = 0;
  // The backend's idea of now (ms since the epoch), for absolute times in answers.
  virtual int64_t NowMs() const = 0;
  // Stops the backend and starts another on what it kept (the data directory, the Redis key
  // prefix), as a restarted server would; the clock goes on. False (nothing done) for a
  // backend that keeps nothing across a restart (memory). Call with no request in flight.
  virtual bool Restart() { return false; }
};

class MemoryHarness : public Harness {
 public:
  explicit MemoryHarness(size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom,
                         HarnessOptions options = {})
      : options_{.run_timer = false,
                 .max_queues = options.max_queues,
                 .max_clients_per_room = max_clients_per_room,
                 .draw_chunk = 64} {  // a draw of a few hundred takes several turns
    backend_.emplace(clock_, options_);
  }
  Backend& backend() override { return *backend_; }
  void AdvanceTime(int64_t ms) override {
    clock_.Advance(ms);
    backend_->RunDue();
  }
  int64_t NowMs() const override { return clock_.NowMs(); }

 protected:
  FakeClock clock_;
  MemoryBackendOptions options_;
  std::optional<MemoryBackend> backend_;
};

// The embedded durable backend: the memory backend with its log in a fresh directory, answers
// waiting for the log as in production (fsync `always`: from the flusher's thread).
class DurableHarness final : public MemoryHarness {
 public:
  explicit DurableHarness(log::FsyncPolicy policy, HarnessOptions options = {})
      : MemoryHarness(core::kDefaultMaxClientsPerRoom, options),
        dir_(MakeDir()),
        store_options_{.dir = dir_, .fsync = policy, .compact_in_background = false},
        store_(std::in_place, *backend_, store_options_) {}
  ~DurableHarness() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // A new backend recovers the directory (snapshot and log), as `anteroom serve` does.
  bool Restart() override {
    store_.reset();
    backend_.reset();
    backend_.emplace(clock_, options_);
    store_.emplace(*backend_, store_options_);
    return true;
  }
  // Writes a snapshot now, so a restart loads it (and the log after it).
  void Compact() {
    std::string error;
    if (!store_->Compact(error)) throw std::runtime_error("compaction failed: " + error);
  }

 private:
  static std::string MakeDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "anteroom-conf-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    return templ;
  }
  std::string dir_;
  log::EmbeddedOptions store_options_;
  std::optional<log::EmbeddedStore> store_;
};

// The Redis backend on a real redis-server (or a 3-master cluster), with the test's clock
// passed to the scripts as their time and the sweeper run by AdvanceTime. Each harness has a
// key prefix of its own.
class RedisHarness final : public Harness {
 public:
  explicit RedisHarness(const std::string& url,
                        size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom,
                        HarnessOptions options = {})
      : options_{.url = url,
                 .key_prefix = NextPrefix(),
                 .redis_time = false,
                 .run_timer = false,
                 .max_queues = options.max_queues,
                 .max_clients_per_room = max_clients_per_room,
                 .draw_chunk = 64} {  // as the memory harness: a draw of a few hundred takes turns
    backend_.emplace(clock_, options_);
  }
  Backend& backend() override { return *backend_; }
  void AdvanceTime(int64_t ms) override {
    clock_.Advance(ms);
    backend_->RunDue();
  }
  int64_t NowMs() const override { return clock_.NowMs(); }
  // Another process on the same Redis and prefix: it sees everything the first one kept.
  bool Restart() override {
    backend_.reset();
    backend_.emplace(clock_, options_);
    return true;
  }

 private:
  static std::string NextPrefix() {
    static std::atomic<int> n{0};
    return "t" + std::to_string(getpid()) + "." + std::to_string(n++) + ":";
  }
  FakeClock clock_;
  redis::RedisBackendOptions options_;
  std::optional<redis::RedisBackend> backend_;
};

struct BackendFactory {
  std::string name;
  std::function<std::unique_ptr<Harness>(HarnessOptions)> make;
};

// Test names and failure messages show the backend's name, not the struct's bytes.
inline void PrintTo(const BackendFactory& factory, std::ostream* os) { *os << factory.name; }

inline std::vector<BackendFactory> Backends() {
  return {
      {"memory",
       [](HarnessOptions o) {
         return std::make_unique<MemoryHarness>(core::kDefaultMaxClientsPerRoom, o);
       }},
      {"log_always",
       [](HarnessOptions o) {
         return std::make_unique<DurableHarness>(log::FsyncPolicy::kAlways, o);
       }},
      {"log_everysec",
       [](HarnessOptions o) {
         return std::make_unique<DurableHarness>(log::FsyncPolicy::kEverySec, o);
       }},
      {"redis",
       [](HarnessOptions o) {
         return std::make_unique<RedisHarness>(RedisServers::Get().Single(),
                                               core::kDefaultMaxClientsPerRoom, o);
       }},
      {"redis_cluster",
       [](HarnessOptions o) {
         return std::make_unique<RedisHarness>(RedisServers::Get().Cluster(),
                                               core::kDefaultMaxClientsPerRoom, o);
       }},
  };
}

inline std::string BackendName(const ::testing::TestParamInfo<BackendFactory>& info) {
  return info.param.name;
}

class BackendTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override { harness_ = GetParam().make({}); }
  // Replaces the backend under test with a fresh one made with `options`.
  void Remake(HarnessOptions options) {
    harness_.reset();
    harness_ = GetParam().make(options);
  }

  // Calls the callback API and waits for its single answer (it may come from another thread).
  template <typename T, typename Call>
  OpResult<T> Await(Call&& call) {
    auto promise = std::make_shared<std::promise<OpResult<T>>>();
    auto future = promise->get_future();
    call([promise](OpResult<T> r) { promise->set_value(std::move(r)); });
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "the backend did not answer";
      return OpResult<T>(OpStatus::kInternal, "timeout");
    }
    return future.get();
  }

  // Creates a room with every field given, so tests do not depend on defaults.
  void MakeRoom(const std::string& room, int64_t capacity, int64_t grace_ms = 5'000,
                int64_t checkin_timeout_ms = 30'000,
                std::optional<int64_t> idle_timeout_ms = 300'000,
                std::optional<int64_t> admit_per_minute = std::nullopt) {
    core::RoomPatch p;
    p.capacity = capacity;
    p.grace_ms = grace_ms;
    p.checkin_timeout_ms = checkin_timeout_ms;
    p.idle_timeout_ms = idle_timeout_ms;
    p.admit_per_minute = admit_per_minute;
    auto info = Await<core::RoomInfo>([&](auto done) { b().PutRoom(room, p, done); });
    ASSERT_TRUE(info.ok()) << info.message();
  }

  Backend& b() { return harness_->backend(); }
  void AdvanceTime(int64_t ms) { harness_->AdvanceTime(ms); }
  int64_t NowMs() const { return harness_->NowMs(); }

  std::unique_ptr<Harness> harness_;
};

}  // namespace anteroom::store::conformance
