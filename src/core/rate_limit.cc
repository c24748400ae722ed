#include "core/rate_limit.h"

#include <algorithm>

namespace anteroom::core {

namespace {

// `ms + rem / limit` moved on by `num / limit` ms (num >= 0), the remainder kept in [0, limit).
GcraTime Plus(GcraTime t, int64_t num, int64_t limit) {
  t.ms += num / limit;
  t.rem += num % limit;
  if (t.rem >= limit) {
    t.rem -= limit;
    ++t.ms;
  }
  return t;
}

GcraTime Minus(GcraTime t, int64_t num, int64_t limit) {
  t.ms -= num / limit;
  t.rem -= num % limit;
  if (t.rem < 0) {
    t.rem += limit;
    --t.ms;
  }
  return t;
}

}  // namespace

bool RateLimit::Valid() const {
  return limit >= 1 && limit <= kMaxLimit && period_ms >= 1 && period_ms <= kMaxPeriodMs &&
         burst >= 1 && burst <= kMaxBurst;
}

// Tolerance = (burst - 1) intervals = (burst - 1) * period_ms / limit: its numerator is at most
// 10^6 * 8.64 * 10^7 < 2^53.
GcraTime Gcra::Earliest(const RateLimit& limit) const {
  return Minus(tat_, (limit.burst - 1) * limit.period_ms, limit.limit);
}

bool Gcra::Allows(const RateLimit& limit, int64_t now_ms) const {
  return GcraTime{now_ms, 0} >= Earliest(limit);
}

void Gcra::Take(const RateLimit& limit, int64_t now_ms) {
  tat_ = Plus(std::max(tat_, GcraTime{now_ms, 0}), limit.period_ms, limit.limit);
}

int64_t Gcra::AllowedAtMs(const RateLimit& limit, int64_t now_ms) const {
  GcraTime e = Earliest(limit);
  return std::max(now_ms, e.ms + (e.rem > 0 ? 1 : 0));
}

// The remainder in the new limit's units, rounded up: TAT never moves earlier.
void Gcra::Rescale(const RateLimit& from, const RateLimit& to) {
  if (from.limit == to.limit || tat_.rem == 0) return;
  int64_t rem = (tat_.rem * to.limit + from.limit - 1) / from.limit;
  tat_ = rem >= to.limit ? GcraTime{tat_.ms + 1, 0} : GcraTime{tat_.ms, rem};
}

void Gcra::Save(ByteWriter& out) const {
  out.Put(tat_.ms);
  out.Put(tat_.rem);
}

bool Gcra::Load(ByteReader& in) {
  tat_.ms = in.Get<int64_t>();
  tat_.rem = in.Get<int64_t>();
  return !in.failed() && tat_.rem >= 0;
}

}  // namespace anteroom::core
