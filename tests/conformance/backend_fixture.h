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

// One backend under test, with a clock the test controls.
class Harness {
 public:
  virtual ~Harness() = default;
  virtual Backend& backend() = 0;
  // Moves time forward and lets the backend's timer run whatever fell due.
  virtual void AdvanceTime(int64_t ms) = 0;
  // The backend's idea of now (ms since the epoch), for absolute times in answers.
  virtual int64_t NowMs() const = 0;
};

class MemoryHarness : public Harness {
 public:
  explicit MemoryHarness(size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom)
      : backend_(clock_, MemoryBackendOptions{.run_timer = false,
                                              .max_clients_per_room = max_clients_per_room}) {}
  Backend& backend() override { return backend_; }
  void AdvanceTime(int64_t ms) override {
    clock_.Advance(ms);
    backend_.RunDue();
  }
  int64_t NowMs() const override { return clock_.NowMs(); }

 protected:
  FakeClock clock_;
  MemoryBackend backend_;
};

// The embedded durable backend: the memory backend with its log in a fresh directory, answers
// waiting for the log as in production (fsync `always`: from the flusher's thread).
class DurableHarness final : public MemoryHarness {
 public:
  explicit DurableHarness(log::FsyncPolicy policy)
      : dir_(MakeDir()),
        store_(std::in_place, backend_,
               log::EmbeddedOptions{.dir = dir_, .fsync = policy, .compact_in_background = false}) {
  }
  ~DurableHarness() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  static std::string MakeDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "anteroom-conf-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    return templ;
  }
  std::string dir_;
  std::optional<log::EmbeddedStore> store_;
};

// The Redis backend on a real redis-server (or a 3-master cluster), with the test's clock
// passed to the scripts as their time and the sweeper run by AdvanceTime. Each harness has a
// key prefix of its own.
class RedisHarness final : public Harness {
 public:
  explicit RedisHarness(const std::string& url,
                        size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom)
      : backend_(clock_, redis::RedisBackendOptions{.url = url,
                                                    .key_prefix = NextPrefix(),
                                                    .redis_time = false,
                                                    .run_timer = false,
                                                    .max_clients_per_room = max_clients_per_room}) {
  }
  Backend& backend() override { return backend_; }
  void AdvanceTime(int64_t ms) override {
    clock_.Advance(ms);
    backend_.RunDue();
  }
  int64_t NowMs() const override { return clock_.NowMs(); }

 private:
  static std::string NextPrefix() {
    static std::atomic<int> n{0};
    return "t" + std::to_string(getpid()) + "." + std::to_string(n++) + ":";
  }
  FakeClock clock_;
  redis::RedisBackend backend_;
};

struct BackendFactory {
  std::string name;
  std::function<std::unique_ptr<Harness>()> make;
};

// Test names and failure messages show the backend's name, not the struct's bytes.
inline void PrintTo(const BackendFactory& factory, std::ostream* os) { *os << factory.name; }

inline std::vector<BackendFactory> Backends() {
  return {
      {"memory", [] { return std::make_unique<MemoryHarness>(); }},
      {"log_always", [] { return std::make_unique<DurableHarness>(log::FsyncPolicy::kAlways); }},
      {"log_everysec",
       [] { return std::make_unique<DurableHarness>(log::FsyncPolicy::kEverySec); }},
      {"redis", [] { return std::make_unique<RedisHarness>(RedisServers::Get().Single()); }},
      {"redis_cluster",
       [] { return std::make_unique<RedisHarness>(RedisServers::Get().Cluster()); }},
  };
}

inline std::string BackendName(const ::testing::TestParamInfo<BackendFactory>& info) {
  return info.param.name;
}

class BackendTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override { harness_ = GetParam().make(); }

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

  Backend& b() { return harness_->backend(); }
  void AdvanceTime(int64_t ms) { harness_->AdvanceTime(ms); }
  int64_t NowMs() const { return harness_->NowMs(); }

  std::unique_ptr<Harness> harness_;
};

}  // namespace anteroom::store::conformance
