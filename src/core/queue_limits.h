#pragma once
// What holds a queue's jobs back and in what order groups are served: the queue's limits, as
// PUT /v1/queues/{q}/settings sets them and core::GroupLine (and queue.lua) applies them.

#include <cstdint>
#include <optional>

#include "common/bytes.h"
#include "core/rate_limit.h"

namespace anteroom::core {

// kFifo: the queue's delivery order across all groups (priority, then push order).
// kRoundRobin: groups take turns, one job a turn; within a group, priority then push order.
enum class Fairness : uint8_t { kFifo, kRoundRobin };

struct JobLimits {
  std::optional<RateLimit> rate;
  int64_t concurrency = 0;  // jobs in flight at once; 0: no limit
  bool any() const { return rate.has_value() || concurrency > 0; }
  friend bool operator==(const JobLimits&, const JobLimits&) = default;
};

inline constexpr int64_t kMaxConcurrency = 1'000'000;

struct QueueLimits {
  Fairness fairness = Fairness::kFifo;
  JobLimits per_group;  // each group's own (not the ungrouped jobs')
  JobLimits queue;      // all jobs together
  friend bool operator==(const QueueLimits&, const QueueLimits&) = default;
};

// Within the bounds: a fairness known, rates RateLimit::Valid, concurrency 0..kMaxConcurrency.
bool ValidLimits(const QueueLimits& limits);
// As snapshots and log records hold them: u8 fairness, then per group and for the queue each
// opt(i64 limit, i64 period_ms, i64 burst) and i64 concurrency. Load refuses invalid limits.
void SaveLimits(ByteWriter& out, const QueueLimits& limits);
bool LoadLimits(ByteReader& in, QueueLimits& limits);

}  // namespace anteroom::core
