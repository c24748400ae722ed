#pragma once
// Time, injected: the engine never reads a clock of its own, so tests drive it with FakeClock.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace anteroom {

// Milliseconds since the Unix epoch.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

// Wall time read once at start, then advanced by the monotonic clock: deadlines neither fire
// all at once nor freeze when the wall clock is stepped, and stay close to wall time for tokens.
class SystemClock final : public Clock {
 public:
  SystemClock();
  int64_t NowMs() const override;

 private:
  int64_t wall_at_start_ms_;
  std::chrono::steady_clock::time_point steady_at_start_;
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(std::memory_order_relaxed); }
  void Advance(int64_t ms) { now_.fetch_add(ms, std::memory_order_relaxed); }
  void Set(int64_t ms) { now_.store(ms, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace anteroom
