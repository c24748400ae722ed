#include "core/minute_window.h"

namespace anteroom::core {

void MinuteWindow::Add(int64_t now_ms) {
  int64_t sec = SecondOf(now_ms);
  Bucket& b = buckets_[static_cast<size_t>(((sec % kSeconds) + kSeconds) % kSeconds)];
  if (b.second != sec) b = {sec, 0};
  ++b.count;
  cached_second_ = INT64_MIN;
}

int64_t MinuteWindow::Count(int64_t now_ms) const {
  int64_t sec = SecondOf(now_ms);
  if (sec == cached_second_) return cached_count_;
  int64_t total = 0;
  for (const Bucket& b : buckets_) {
    if (b.second > sec - kSeconds && b.second <= sec) total += b.count;
  }
  cached_second_ = sec;
  cached_count_ = total;
  return total;
}

int64_t MinuteWindow::NextBelow(int64_t now_ms, int64_t limit) const {
  int64_t count = Count(now_ms);
  if (count < limit) return now_ms;
  // Walk the window from its oldest second; each one leaves 60 s after it began.
  int64_t sec = SecondOf(now_ms);
  for (int64_t s = sec - kSeconds + 1; s <= sec; ++s) {
    const Bucket& b = buckets_[static_cast<size_t>(((s % kSeconds) + kSeconds) % kSeconds)];
    if (b.second != s) continue;
    count -= b.count;
    if (count < limit) return (s + kSeconds) * 1000;
  }
  return (sec + 1) * 1000;  // unreachable for limit >= 1
}

void MinuteWindow::Save(ByteWriter& out) const {
  for (const Bucket& b : buckets_) {
    out.Put(b.second);
    out.Put(b.count);
  }
}

void MinuteWindow::Load(ByteReader& in) {
  for (Bucket& b : buckets_) {
    b.second = in.Get<int64_t>();
    b.count = in.Get<int64_t>();
  }
  cached_second_ = INT64_MIN;
}

}  // namespace anteroom::core
