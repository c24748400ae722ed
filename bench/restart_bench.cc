// Restart and compaction of the embedded durable backend: how long recovery takes for
// a given state, from the log alone and from a snapshot, and how long a compaction pauses the
// backend (the fork) and runs in all. Target: restart <= 2 s with 1M queued jobs and 100k
// waiting sessions.
//
// The data directory is built once per state size (pushes of 1000 jobs of a ~60-byte JSON
// payload, room checks), under /tmp (ANTEROOM_BENCH_DIR to choose), and removed at the end.
// Each iteration then recovers it into a fresh backend, exactly as `anteroom serve` starts.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "store/log/embedded_store.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store {
namespace {

constexpr int64_t kStartMs = 1'800'000'000'000;

std::string BaseDir() {
  const char* dir = std::getenv("ANTEROOM_BENCH_DIR");
  return dir ? dir : (std::filesystem::temp_directory_path() / "anteroom-restart-bench").string();
}

template <typename T, typename Call>
OpResult<T> Await(Call&& call) {
  std::promise<OpResult<T>> p;
  auto f = p.get_future();
  call([&](OpResult<T> r) { p.set_value(std::move(r)); });
  return f.get();
}

// Pushes `jobs` ready jobs of a ~60-byte JSON payload, 1000 at a time.
void PushJobs(MemoryBackend& backend, int64_t jobs) {
  for (int64_t n = 0; n < jobs;) {
    std::vector<core::JobSpec> batch;
    for (int k = 0; k < 1000 && n < jobs; ++k, ++n) {
      core::JobSpec job;
      job.payload = "{\"user\":" + std::to_string(n) +
                    ",\"email\":\"someone@example.com\",\"kind\":\"welcome\"}";
      batch.push_back(std::move(job));
    }
    (void)Await<std::vector<core::PushResult>>(
        [&](auto done) { backend.Push("jobs", std::move(batch), done); });
  }
}

struct Built {
  std::string dir;
  log::EmbeddedStore::CompactionStats compaction;
  double build_seconds = 0;
};

// Builds (once per shape) a directory holding `jobs` ready jobs and `sessions` waiting sessions,
// compacted into a snapshot or not.
const Built& Build(int64_t jobs, int64_t sessions, bool snapshot) {
  static std::map<std::tuple<int64_t, int64_t, bool>, Built> built;
  auto key = std::make_tuple(jobs, sessions, snapshot);
  if (auto it = built.find(key); it != built.end()) return it->second;
  Built b;
  b.dir = BaseDir() + "/" + std::to_string(jobs) + "-" + std::to_string(sessions) +
          (snapshot ? "-snap" : "-log");
  std::filesystem::remove_all(b.dir);
  auto start = std::chrono::steady_clock::now();
  {
    FakeClock clock(kStartMs);
    MemoryBackend backend(clock, {.run_timer = false});
    log::EmbeddedStore store(
        backend, {.dir = b.dir, .fsync = log::FsyncPolicy::kNo, .compact_in_background = false});
    PushJobs(backend, jobs);
    core::RoomPatch patch;
    patch.capacity = 1000;
    patch.checkin_timeout_ms = 3'600'000;
    (void)Await<core::RoomInfo>([&](auto done) { backend.PutRoom("launch", patch, done); });
    for (int64_t s = 0; s < sessions + 1000; ++s) {
      backend.Check("launch", "session-" + std::to_string(s) + "-abcdefghijkl", [](auto) {});
    }
    if (snapshot) {
      std::string error;
      if (!store.Compact(error)) std::abort();
      b.compaction = store.compaction_stats();
    }
  }
  b.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return built.emplace(key, b).first->second;
}

void BM_Restart(benchmark::State& state) {
  int64_t jobs = state.range(0), sessions = state.range(1);
  bool snapshot = state.range(2) != 0;
  const Built& b = Build(jobs, sessions, snapshot);
  log::RecoveryReport report;
  for (auto _ : state) {
    FakeClock clock(kStartMs);
    auto backend = std::make_unique<MemoryBackend>(clock, MemoryBackendOptions{.run_timer = false});
    auto store = std::make_unique<log::EmbeddedStore>(
        *backend,
        log::EmbeddedOptions{
            .dir = b.dir, .fsync = log::FsyncPolicy::kNo, .compact_in_background = false});
    report = store->recovery();
    state.PauseTiming();  // tearing down is not part of a restart
    store.reset();
    backend.reset();
    state.ResumeTiming();
  }
  state.counters["log_MB"] = static_cast<double>(report.log_bytes) / 1e6;
  state.counters["snapshot_MB"] = static_cast<double>(report.snapshot_bytes) / 1e6;
  state.counters["records"] = static_cast<double>(report.records);
  if (snapshot) {
    state.counters["fork_pause_ms"] = b.compaction.last_pause_ms;
    state.counters["compaction_s"] = b.compaction.last_seconds;
  }
}

// {jobs, waiting sessions, from a snapshot}
BENCHMARK(BM_Restart)
    ->Args({100'000, 10'000, 0})
    ->Args({100'000, 10'000, 1})
    ->Args({1'000'000, 100'000, 0})
    ->Args({1'000'000, 100'000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// The pause a compaction imposes on requests, by snapshot writer: the fork alone, or the copy
// of the whole state that replaces it when fork fails (and in sanitizer builds).
void BM_CompactionPause(benchmark::State& state) {
  const auto writer = static_cast<log::SnapshotWriter>(state.range(0));
  const int64_t jobs = state.range(1);
  std::string dir = BaseDir() + "/pause-" + std::to_string(jobs);
  std::filesystem::remove_all(dir);
  FakeClock clock(kStartMs);
  MemoryBackend backend(clock, {.run_timer = false});
  log::EmbeddedStore store(backend, {.dir = dir,
                                     .fsync = log::FsyncPolicy::kNo,
                                     .compact_in_background = false,
                                     .snapshot_writer = writer});
  PushJobs(backend, jobs);
  double pause_ms = 0, seconds = 0;
  uint64_t bytes = 0;
  for (auto _ : state) {
    std::string error;
    if (!store.Compact(error)) std::abort();
    auto stats = store.compaction_stats();
    pause_ms += stats.last_pause_ms;
    seconds += stats.last_seconds;
    bytes = stats.last_snapshot_bytes;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["pause_ms"] = pause_ms / n;
  state.counters["compaction_s"] = seconds / n;
  state.counters["snapshot_MB"] = static_cast<double>(bytes) / 1e6;
}

// {writer (0: forked child, 1: this process), queued jobs}
BENCHMARK(BM_CompactionPause)
    ->Args({0, 1'000'000})
    ->Args({1, 1'000'000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace
}  // namespace anteroom::store

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove_all(anteroom::store::BaseDir());
  return 0;
}
