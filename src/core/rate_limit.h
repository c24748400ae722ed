#pragma once
// A rate limit as the generic cell rate algorithm (GCRA) keeps it: `limit` takes per `period_ms`,
// and at most `burst` at once after a quiet spell. Over any window of W ms a key is allowed at
// most burst + limit * W / period_ms takes (rounded down): the bound the queue's per-group
// limits promise and the model test checks.
//
// One time per key is the whole state: the theoretical arrival time (TAT), when the key would
// be back to no debt at all. A take at `now` is allowed when now >= TAT - tolerance, where each
// take adds one emission interval (period_ms / limit) to TAT and the tolerance is burst - 1
// intervals. The interval is rarely a whole number of ms (3 per second is 333 1/3 ms), so TAT
// is kept as whole ms plus a remainder in limit-ths of a ms: exact, and every value stays below
// 2^53, so Redis's Lua (numbers are doubles) computes the same answers with the same fields.
// Takes happen at whole ms: with burst 1 and an interval that is not a whole number of ms, a take
// waits for the next whole ms and the next interval counts from it (3 a second come every 334
// ms); a burst of 2 or more absorbs that rounding and keeps the exact pace.

#include <cstdint>
#include <string>

#include "common/bytes.h"

namespace anteroom::core {

struct RateLimit {
  static constexpr int64_t kMaxLimit = 1'000'000;
  static constexpr int64_t kMaxPeriodMs = 86'400'000;  // a day
  static constexpr int64_t kMaxBurst = 1'000'000;

  int64_t limit = 1;      // takes per period, 1..kMaxLimit
  int64_t period_ms = 1;  // 1..kMaxPeriodMs
  int64_t burst = 1;      // takes at once after a quiet spell, 1..kMaxBurst

  // Within the bounds above: what keeps every value of the arithmetic below 2^53.
  bool Valid() const;
  friend bool operator==(const RateLimit&, const RateLimit&) = default;
};

// A moment as TAT is kept: ms + rem / limit, 0 <= rem < limit.
struct GcraTime {
  int64_t ms = 0;
  int64_t rem = 0;
  friend auto operator<=>(const GcraTime&, const GcraTime&) = default;
};

// One key's state. Times are ms >= 0. A fresh key (TAT 0) and a forgotten one answer the same:
// a state whose TAT is <= now may be dropped (Idle), which keeps a limiter's memory to its busy
// keys.
class Gcra {
 public:
  // Whether a take at `now_ms` is allowed.
  bool Allows(const RateLimit& limit, int64_t now_ms) const;
  // Takes one (call only when Allows): TAT moves one interval on from max(TAT, now).
  void Take(const RateLimit& limit, int64_t now_ms);
  // The earliest ms >= now_ms at which a take is allowed.
  int64_t AllowedAtMs(const RateLimit& limit, int64_t now_ms) const;
  // Nothing owed at now_ms: the state is the same as a fresh key's.
  bool Idle(int64_t now_ms) const { return tat_ <= GcraTime{now_ms, 0}; }

  const GcraTime& tat() const { return tat_; }
  // A limit changed under a key: TAT's remainder is in the old limit's units. Rounded up to the
  // next whole ms, so a change never allows more than either limit would.
  void Rescale(const RateLimit& from, const RateLimit& to);

  void Save(ByteWriter& out) const;
  bool Load(ByteReader& in);

 private:
  // TAT - tolerance: the earliest moment a take is allowed (may be before 0).
  GcraTime Earliest(const RateLimit& limit) const;
  GcraTime tat_{};
};

}  // namespace anteroom::core
