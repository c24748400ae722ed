// Engine benchmarks: core::Room, core::Queue and the draw (core::FisherYates) on one thread, no
// I/O, no locks (the HTTP layer is measured by `anteroom-bench rooms` and bench/wrk/check.lua).
// Targets (docs/benchmarks.md): >= 2M checks/s on a room with 1M waiting sessions; <= 200 bytes
// per waiting session; a 10M-person draw in <= 2 s, in chunks of well under 50 ms.
//
// Session ids look like the server's: 22 base64url characters (16 pseudo-random bytes), so they
// do not fit std::string's 15-byte inline buffer, exactly as in production.
//
// Rooms of 1M sessions take about a second to build, so one fixture is kept alive between the
// calls Google Benchmark makes to the same benchmark (it calls each one several times while it
// picks an iteration count) and is destroyed when another benchmark asks for a different one.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64url.h"
#include "core/draw.h"
#include "core/group_line.h"
#include "core/hmac.h"
#include "core/queue.h"
#include "core/room.h"
#include "core/room_event.h"
#include "core/room_types.h"

namespace anteroom::core {
namespace {

constexpr int64_t kIdLength = 22;
constexpr int64_t kRevocationTtlMs = 600'000;  // the server's default token TTL
constexpr int64_t kMillion = 1'000'000;

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `n` distinct ids of kIdLength characters, stored back to back in one buffer so that reading
// them in order costs the benchmark loop no cache misses of its own.
class IdPool {
 public:
  IdPool(int64_t n, uint64_t seed) : n_(n) {
    chars_.reserve(static_cast<size_t>(n * kIdLength));
    uint64_t state = seed;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t raw[2] = {SplitMix64(state), SplitMix64(state)};
      chars_ += Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(raw), sizeof(raw)));
    }
  }
  // The same ids, reordered by a pseudo-random permutation (a random check order).
  IdPool Shuffled(uint64_t seed) const {
    std::vector<int64_t> order(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) order[static_cast<size_t>(i)] = i;
    uint64_t state = seed;
    for (int64_t i = n_ - 1; i > 0; --i) {
      auto j = static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(i + 1));
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
    IdPool out;
    out.n_ = n_;
    out.chars_.reserve(chars_.size());
    for (int64_t i : order) out.chars_.append(Get(i));
    return out;
  }
  std::string_view Get(int64_t i) const {
    return std::string_view(chars_).substr(static_cast<size_t>(i * kIdLength), kIdLength);
  }
  int64_t size() const { return n_; }

 private:
  IdPool() = default;
  int64_t n_ = 0;
  std::string chars_;
};

RoomConfig BenchConfig(int64_t capacity, int64_t checkin_timeout_ms) {
  RoomConfig config;
  config.capacity = capacity;
  config.checkin_timeout_ms = checkin_timeout_ms;
  config.idle_timeout_ms = std::nullopt;  // as `anteroom-bench rooms` configures its room
  return config;
}

// A room and the ids in it, kept between calls of one benchmark (see the header comment).
struct Fixture {
  std::string key;
  std::unique_ptr<Room> room;
  IdPool ids{0, 0};       // in join order
  IdPool shuffled{0, 0};  // the same ids in a random order
  IdPool extra{0, 0};     // ids that are not in the room (for churn)
  int64_t now = 0;
};

std::unique_ptr<Fixture>& CurrentFixture() {
  static std::unique_ptr<Fixture> fixture;
  return fixture;
}

// A room of `n` sessions all joined at time 0; `capacity` 1 leaves n - 1 waiting.
Fixture& GetFixture(const std::string& kind, int64_t n, int64_t capacity, int64_t extra = 0) {
  std::string key = kind + "/" + std::to_string(n);
  std::unique_ptr<Fixture>& f = CurrentFixture();
  if (f && f->key == key) return *f;
  f.reset();  // free the previous room before building the next one
  f = std::make_unique<Fixture>();
  f->key = key;
  f->ids = IdPool(n, 42);
  f->shuffled = f->ids.Shuffled(7);
  f->extra = IdPool(extra, 4242);
  f->room = std::make_unique<Room>(BenchConfig(capacity, kMaxDurationMs), kRevocationTtlMs, 0);
  for (int64_t i = 0; i < n; ++i) f->room->Check(f->ids.Get(i), 0);
  f->now = 1;
  return *f;
}

// Checks cycle over `ids`; the clock moves 1 ms every 4096 checks (nobody expires: the check-in
// timeout is 7 days).
void RunChecks(benchmark::State& state, Fixture& f, const IdPool& ids) {
  int64_t n = ids.size();
  int64_t j = 0;
  int64_t tick = 0;
  for (auto _ : state) {
    SessionView v = f.room->Check(ids.Get(j), f.now);
    benchmark::DoNotOptimize(v);
    if (++j == n) j = 0;
    if ((++tick & 4095) == 0) ++f.now;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["sessions"] = static_cast<double>(f.room->sessions());
  state.counters["waiting"] = static_cast<double>(f.room->waiting());
}

// The headline: check-ins of waiting sessions, in a random order, in a room of capacity 1.
void BM_CheckWaiting(benchmark::State& state) {
  Fixture& f = GetFixture("waiting", state.range(0), 1);
  RunChecks(state, f, f.shuffled);
}
BENCHMARK(BM_CheckWaiting)
    ->ArgName("sessions")
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(kMillion)
    ->Unit(benchmark::kNanosecond);

// The same, but checking sessions in join order (as `anteroom-bench rooms` cycles bench-N):
// the access pattern is friendlier to the caches.
void BM_CheckWaitingInOrder(benchmark::State& state) {
  Fixture& f = GetFixture("waiting", state.range(0), 1);
  RunChecks(state, f, f.ids);
}
BENCHMARK(BM_CheckWaitingInOrder)->ArgName("sessions")->Arg(kMillion);

// Check-ins of active sessions (capacity >= sessions), random order.
void BM_CheckActive(benchmark::State& state) {
  Fixture& f = GetFixture("active", state.range(0), state.range(0));
  RunChecks(state, f, f.shuffled);
}
BENCHMARK(BM_CheckActive)
    ->ArgName("sessions")
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(kMillion);

// Churn: a new session joins (check), then leaves finally, on top of `sessions` that stay.
// capacity 1 (the slot is held by the first of the `sessions`): the newcomer waits at the back of
// the line. capacity large: it is admitted, and its final leave frees the slot and records a
// revocation (remembered for the token TTL, here 600 s of the 1 ms-per-cycle clock).
void JoinLeave(benchmark::State& state, int64_t capacity, const char* kind) {
  int64_t base = state.range(0);
  Fixture& f = GetFixture(kind, base, capacity, 1 << 16);
  int64_t j = 0;
  for (auto _ : state) {
    std::string_view id = f.extra.Get(j);
    benchmark::DoNotOptimize(f.room->Check(id, f.now));
    benchmark::DoNotOptimize(f.room->Leave(id, /*final=*/true, f.now));
    if (++j == f.extra.size()) j = 0;
    ++f.now;  // 1 ms per cycle: revocations older than the TTL are forgotten as in production
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["sessions"] = static_cast<double>(f.room->sessions());
}
void BM_JoinLeaveWaiting(benchmark::State& state) { JoinLeave(state, 1, "churn-waiting"); }
void BM_JoinLeaveActive(benchmark::State& state) { JoinLeave(state, kMaxCapacity, "churn-active"); }
BENCHMARK(BM_JoinLeaveWaiting)
    ->ArgName("sessions")
    ->Arg(1)
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(kMillion);
BENCHMARK(BM_JoinLeaveActive)->ArgName("sessions")->Arg(0)->Arg(kMillion);

// Expiry: the cost of one Advance() that drops `expire` of `sessions` waiting sessions.
//
// Steady state without rebuilding the room: the room holds G = sessions / expire groups of
// `expire` sessions, group g joined at time g, and the check-in timeout is G ms. Iteration g
// advances to G + g, which drops exactly group g (deadline g + G); the group then re-joins at
// G + g (untimed), so it becomes due again G iterations later. One claimed active session (the
// capacity is 1) holds the slot without a deadline, so nobody is admitted.
void BM_Expiry(benchmark::State& state) {
  int64_t n = state.range(0);
  int64_t k = state.range(1);
  int64_t groups = n / k;
  IdPool ids(groups * k, 99);
  Room room(BenchConfig(1, groups), kRevocationTtlMs, 0);
  room.Check("holder-of-the-slot", 0);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < k; ++i) room.Check(ids.Get(g * k + i), g);
  }
  int64_t g = 0;
  double timed_s = 0;
  for (auto _ : state) {
    int64_t now = groups + g;
    auto start = std::chrono::steady_clock::now();
    room.Advance(now);
    auto stop = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(secs);
    timed_s += secs;
    int64_t group = g % groups;
    for (int64_t i = 0; i < k; ++i) room.Check(ids.Get(group * k + i), now);
    ++g;
  }
  if (room.sessions() != static_cast<size_t>(n + 1) || room.counters().dropped_total < k) {
    state.SkipWithError("the room did not expire exactly one group per iteration");
  }
  state.SetItemsProcessed(state.iterations() * k);  // items = expired sessions
  state.counters["expired_per_advance"] = static_cast<double>(k);
  state.counters["ns_per_expired"] =
      timed_s * 1e9 / static_cast<double>(std::max<int64_t>(1, state.iterations() * k));
}
// Fixed iteration counts: every call rebuilds the room, and k = 100000 re-joins are slow.
[[maybe_unused]] const int kExpiryRegistered = [] {
  const int64_t cases[][3] = {
      // sessions, expire, iterations
      {100'000, 1, 100'000},   {100'000, 100, 10'000},  {100'000, 10'000, 200},
      {kMillion, 1, 100'000},  {kMillion, 100, 10'000}, {kMillion, 10'000, 200},
      {kMillion, 100'000, 20},
  };
  for (const auto& c : cases) {
    benchmark::RegisterBenchmark("BM_Expiry", BM_Expiry)
        ->ArgNames({"sessions", "expire"})
        ->Args({c[0], c[1]})
        ->Iterations(c[2])
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}();

// Bytes malloc has handed out: small chunks from the arenas plus big blocks served by mmap (large
// vectors), chunk headers and rounding included.
size_t HeapInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// Memory per waiting session: Room::MemoryBytes() / n (the model: array capacities and id
// buffers) and the heap growth seen by malloc, for a room of capacity 1 with n - 1 waiting.
void BM_MemoryPerWaitingSession(benchmark::State& state) {
  int64_t n = state.range(0);
  CurrentFixture().reset();
  IdPool ids(n, 1234);
  for (auto _ : state) {
    size_t before = HeapInUse();
    auto room = std::make_unique<Room>(BenchConfig(1, kMaxDurationMs), kRevocationTtlMs, 0);
    for (int64_t i = 0; i < n; ++i) room->Check(ids.Get(i), 0);
    size_t after = HeapInUse();
    double sessions = static_cast<double>(room->sessions());
    state.counters["bytes_per_session_model"] = static_cast<double>(room->MemoryBytes()) / sessions;
    state.counters["bytes_per_session_heap"] = static_cast<double>(after - before) / sessions;
    state.counters["waiting"] = static_cast<double>(room->waiting());
    benchmark::DoNotOptimize(room);
  }
}
BENCHMARK(BM_MemoryPerWaitingSession)
    ->ArgName("sessions")
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(kMillion)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---- queues: cost against the number of ready jobs ------------------------------------------

// A payload as a producer sends it: a small JSON object (14 bytes), kept as its text.
std::string PayloadFor(int64_t k) { return "{\"k\":" + std::to_string(1'000'000 + k) + "}"; }

std::vector<JobSpec> OneJob(int64_t k) {
  std::vector<JobSpec> jobs(1);
  jobs[0].payload = PayloadFor(k);
  return jobs;
}

// One job's whole life on top of `ready` jobs already waiting: push one (to the back), fetch
// one (from the front: the oldest), ack it. The line stays at `ready` jobs.
void BM_QueueCycle(benchmark::State& state) {
  const int64_t ready = state.range(0);
  CurrentFixture().reset();
  Hmac key("bench-lease-key-of-32-bytes-long");
  Queue queue("bench", key, 0, 42);
  int64_t now = 1;
  for (int64_t k = 0; k < ready; ++k) queue.Push(OneJob(k), now);
  int64_t k = ready;
  for (auto _ : state) {
    queue.Push(OneJob(k++), now);
    std::vector<Delivery> got = queue.Fetch("w1", 1, 30'000, now);
    if (got.size() != 1 || queue.Ack(got[0].lease, now) != LeaseOutcome::kOk) {
      state.SkipWithError("a cycle did not deliver and ack one job");
      break;
    }
    ++now;
  }
  state.SetItemsProcessed(state.iterations());  // items = jobs through their whole life
  state.counters["ready"] = static_cast<double>(queue.Stats(now).ready);
}
BENCHMARK(BM_QueueCycle)->ArgName("ready")->Arg(1'000)->Arg(100'000)->Arg(kMillion);

// BM_QueueCycle with every job in a group and every group limited (1,000 a second, burst 10, 5
// in flight; none binding at one fetch per ms): `groups` groups of 10 ready jobs each, pushed
// to in turn. What a fetch costs as the number of limited groups grows, against BM_QueueCycle's
// figure with no group at all. Fairness 0: fifo, 1: round_robin.
void BM_QueueGroupsCycle(benchmark::State& state) {
  const int64_t groups = state.range(0);
  CurrentFixture().reset();
  Hmac key("bench-lease-key-of-32-bytes-long");
  Queue queue("bench", key, 0, 42);
  QueueSettings settings;
  settings.limits.fairness = state.range(1) == 0 ? Fairness::kFifo : Fairness::kRoundRobin;
  settings.limits.per_group.rate = RateLimit{.limit = 1000, .period_ms = 1000, .burst = 10};
  settings.limits.per_group.concurrency = 5;
  queue.Configure(settings, 0);
  std::vector<std::string> names;
  for (int64_t g = 0; g < groups; ++g) names.push_back("tenant-" + std::to_string(g));
  int64_t now = 1;
  int64_t k = 0;
  auto push = [&] {
    std::vector<JobSpec> jobs = OneJob(k);
    jobs[0].group = names[static_cast<size_t>(k % groups)];
    ++k;
    queue.Push(jobs, now);
  };
  for (int64_t n = 0; n < groups * 10; ++n) push();
  for (auto _ : state) {
    push();
    std::vector<Delivery> got = queue.Fetch("w1", 1, 30'000, now);
    if (got.size() != 1 || queue.Ack(got[0].lease, now) != LeaseOutcome::kOk) {
      state.SkipWithError("a cycle did not deliver and ack one job");
      break;
    }
    ++now;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["ready"] = static_cast<double>(queue.Stats(now).ready);
}
BENCHMARK(BM_QueueGroupsCycle)
    ->ArgNames({"groups", "rr"})
    ->ArgsProduct({{10, 1'000, 100'000}, {0, 1}});

// A fetch's choice among groups (issue 31: fetch cost stays flat in the number of limited
// groups): `groups` groups of 10 ready jobs each, every group limited (1,000 a second, burst
// 10, 5 in flight); each iteration takes the next job the fairness allows, finishes it and
// pushes one to the same group, so the line stays at 10 x groups. Fairness 0: fifo, 1:
// round_robin. The core of a fetch only: the queue's lease and record work is BM_QueueCycle's.
void BM_GroupLineCycle(benchmark::State& state) {
  const int64_t groups = state.range(0);
  GroupLine line;
  line.Configure({.fairness = state.range(1) == 0 ? Fairness::kFifo : Fairness::kRoundRobin,
                  .per_group = {.rate = RateLimit{.limit = 1000, .period_ms = 1000, .burst = 10},
                                .concurrency = 5},
                  .queue = {}},
                 0);
  struct Job {
    GroupLine::GroupId group;
    int64_t order;
    uint64_t ticket;
  };
  std::vector<Job> jobs;
  jobs.reserve(static_cast<size_t>(groups) * 10 + 1);
  std::vector<uint32_t> free;
  int64_t order = 0;
  uint64_t ticket = 1;
  int64_t now = 1;
  auto push = [&](GroupLine::GroupId g) {
    uint32_t i;
    if (!free.empty()) {
      i = free.back();
      free.pop_back();
    } else {
      i = static_cast<uint32_t>(jobs.size());
      jobs.push_back({});
    }
    jobs[i] = {g, order++, ticket++};
    line.PushBack(g, i, 0, jobs[i].order, jobs[i].ticket, now);
  };
  for (int64_t g = 0; g < groups; ++g) {
    GroupLine::GroupId id = line.Ref("tenant-" + std::to_string(g));
    for (int k = 0; k < 10; ++k) push(id);
  }
  auto live = [&](uint32_t i, uint64_t t) { return jobs[i].ticket == t; };
  auto order_of = [&](uint32_t i) { return jobs[i].order; };
  for (auto _ : state) {
    std::optional<uint32_t> i = line.Take(now, live, order_of);
    if (!i) {
      state.SkipWithError("no job could be taken");
      break;
    }
    GroupLine::GroupId g = jobs[*i].group;
    jobs[*i].ticket = 0;
    free.push_back(*i);
    line.Finished(g, now);
    push(g);
    ++now;  // time moves on: rates are spent and paid back
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["groups"] = static_cast<double>(line.groups() - 1);
}
BENCHMARK(BM_GroupLineCycle)
    ->ArgNames({"groups", "round_robin"})
    ->ArgsProduct({{10, 1'000, 100'000}, {0, 1}});

// Memory per ready job beyond its payload: the heap growth of pushing `ready` jobs, less the
// payload bytes themselves.
void BM_MemoryPerReadyJob(benchmark::State& state) {
  const int64_t ready = state.range(0);
  CurrentFixture().reset();
  Hmac key("bench-lease-key-of-32-bytes-long");
  for (auto _ : state) {
    size_t before = HeapInUse();
    auto queue = std::make_unique<Queue>("bench", key, 0, 42);
    size_t payload_bytes = 0;
    for (int64_t k = 0; k < ready; ++k) {
      std::vector<JobSpec> job = OneJob(k);
      payload_bytes += job[0].payload.size();
      queue->Push(job, 1);
    }
    size_t after = HeapInUse();
    double n = static_cast<double>(queue->Stats(1).ready);
    state.counters["bytes_per_job_beyond_payload"] =
        (static_cast<double>(after - before) - static_cast<double>(payload_bytes)) / n;
    state.counters["payload_bytes_per_job"] = static_cast<double>(payload_bytes) / n;
    // The whole queue, its own object included: with 1 or 10 jobs, what a queue costs.
    state.counters["bytes_in_all"] = static_cast<double>(after - before);
    benchmark::DoNotOptimize(queue);
  }
}
BENCHMARK(BM_MemoryPerReadyJob)
    ->ArgName("ready")
    ->Arg(1)
    ->Arg(10)
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(kMillion)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---- a drop in the engine: a pre-queue of n, its draw, then checks ----------------------------

// A drop at engine scale: a room of capacity 10,000 with an event whose pre-queue n people
// join (at time 0), a shuffled start at t = 1 s published in the server's chunks (50,000
// positions a step, --draw-chunk's default), then check-ins in a random order against the
// drawn line. Counters: heap per person in the pre-queue and once drawn (malloc's view, the
// ids' buffers included), the draw's whole time and its longest step (what one room's lock
// is held for: target well under 50 ms), the longest join of the n (a growth of the room's
// tables), and ns per check of the drawn room (flat 1k -> 10M).
void BM_LaunchDrop(benchmark::State& state) {
  const int64_t n = state.range(0);
  constexpr size_t kChunk = 50'000;
  constexpr int64_t kChecks = 2'000'000;
  CurrentFixture().reset();
  IdPool ids(n, 42);
  IdPool shuffled = ids.Shuffled(7);
  for (auto _ : state) {
    size_t before = HeapInUse();
    auto room = std::make_unique<Room>(BenchConfig(10'000, kMaxDurationMs), kRevocationTtlMs, 0);
    EventSpec spec;
    spec.name = "drop";
    spec.prequeue_at = 0;
    spec.starts_at = 1'000;
    spec.ends_at = kMaxDurationMs;
    spec.shuffle_at_start = true;
    if (!room->PutEvent("drop", spec, 0).ok()) state.SkipWithError("the event was refused");
    double worst_join_s = 0;  // a growth of the room's tables is paid by one join
    for (int64_t i = 0; i < n; ++i) {
      auto join = std::chrono::steady_clock::now();
      room->Check(ids.Get(i), 0);
      worst_join_s =
          std::max(worst_join_s,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - join).count());
    }
    size_t queued = HeapInUse();
    auto start = std::chrono::steady_clock::now();
    room->Advance(1'000);
    if (!room->NeedsSeed()) state.SkipWithError("no draw at the start");
    room->SeedDraw(DrawSeed{1});
    double worst_s = 0;
    while (room->Drawing()) {
      auto step = std::chrono::steady_clock::now();
      room->DrawStep(kChunk, 1'000);
      worst_s = std::max(
          worst_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - step).count());
    }
    double draw_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t drawn = HeapInUse();
    if (room->waiting() + room->holders() != n) state.SkipWithError("someone was lost");
    auto checks = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < kChecks; ++k) {
      SessionView v = room->Check(shuffled.Get(k % n), 1'000 + k / 4096);
      benchmark::DoNotOptimize(v);
    }
    double check_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - checks).count();
    const auto people = static_cast<double>(n);
    state.counters["bytes_per_person_prequeue"] = static_cast<double>(queued - before) / people;
    state.counters["bytes_per_person_drawn"] = static_cast<double>(drawn - before) / people;
    state.counters["draw_ms"] = draw_s * 1e3;
    state.counters["worst_step_ms"] = worst_s * 1e3;
    state.counters["worst_join_ms"] = worst_join_s * 1e3;
    state.counters["check_ns"] = check_s * 1e9 / static_cast<double>(kChecks);
    state.counters["waiting"] = static_cast<double>(room->waiting());
    benchmark::DoNotOptimize(room);
  }
}
BENCHMARK(BM_LaunchDrop)
    ->ArgName("people")
    ->Arg(1'000)
    ->Arg(100'000)
    ->Arg(kMillion)
    ->Arg(10 * kMillion)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// ---- the draw: an event's pre-queue shuffled (core/draw.h) ----------------------------------

// The whole permutation of `people` (0 .. n-1, as a pre-queue in arrival order), on one core:
// the stream's set-up, every step, nothing else (building the vector is untimed). Target
// (docs/benchmarks.md): 10M people in <= 2 s.
void BM_DrawShuffle(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  CurrentFixture().reset();
  DrawSeed seed{};
  uint64_t draws = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<uint32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    seed[0] = static_cast<uint8_t>(++draws);
    state.ResumeTiming();
    FisherYates draw(seed, std::move(order));
    draw.Step(n);
    benchmark::DoNotOptimize(draw.order().data());
    if (draw.done() != n) state.SkipWithError("the draw did not finish");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items = people placed
}
BENCHMARK(BM_DrawShuffle)
    ->ArgName("people")
    ->Arg(kMillion)
    ->Arg(10 * kMillion)
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

// One chunk of `steps` steps of a 10M draw: what the room's lock is held for while a draw is
// computed (bound: 50 ms). The iterations walk one whole draw chunk by chunk (100 chunks of
// 100k; a new draw when one ends, untimed); the early chunks are the slow ones (their swaps
// reach anywhere in the 40 MB order), so the worst chunk is reported beside the mean.
void BM_DrawChunk(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto steps = static_cast<size_t>(state.range(1));
  CurrentFixture().reset();
  auto fresh = [n] {
    std::vector<uint32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    return FisherYates(DrawSeed{}, std::move(order));
  };
  FisherYates draw = fresh();
  double worst_s = 0;
  for (auto _ : state) {
    if (draw.done() == n) draw = fresh();
    auto start = std::chrono::steady_clock::now();
    draw.Step(steps);
    auto stop = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(secs);
    worst_s = std::max(worst_s, secs);
  }
  state.SetItemsProcessed(state.iterations() * state.range(1));  // items = steps
  state.counters["worst_chunk_ms"] = worst_s * 1e3;
}
BENCHMARK(BM_DrawChunk)
    ->ArgNames({"people", "steps"})
    ->Args({10 * kMillion, 100'000})
    ->Iterations(100)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace anteroom::core

BENCHMARK_MAIN();
