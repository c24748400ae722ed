#include "core/queue_limits.h"

namespace anteroom::core {

bool ValidLimits(const QueueLimits& limits) {
  if (limits.fairness > Fairness::kRoundRobin) return false;
  for (const JobLimits* l : {&limits.per_group, &limits.queue}) {
    if (l->rate && !l->rate->Valid()) return false;
    if (l->concurrency < 0 || l->concurrency > kMaxConcurrency) return false;
  }
  return true;
}

void SaveLimits(ByteWriter& out, const QueueLimits& limits) {
  out.Put(limits.fairness);
  for (const JobLimits* l : {&limits.per_group, &limits.queue}) {
    out.PutBool(l->rate.has_value());
    if (l->rate) {
      out.Put(l->rate->limit);
      out.Put(l->rate->period_ms);
      out.Put(l->rate->burst);
    }
    out.Put(l->concurrency);
  }
}

bool LoadLimits(ByteReader& in, QueueLimits& limits) {
  limits = QueueLimits{};
  limits.fairness = in.Get<Fairness>();
  for (JobLimits* l : {&limits.per_group, &limits.queue}) {
    if (in.GetBool()) {
      RateLimit r;
      r.limit = in.Get<int64_t>();
      r.period_ms = in.Get<int64_t>();
      r.burst = in.Get<int64_t>();
      l->rate = r;
    }
    l->concurrency = in.Get<int64_t>();
  }
  return !in.failed() && ValidLimits(limits);
}

}  // namespace anteroom::core
