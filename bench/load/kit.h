#pragma once
// What every load generator measures with, written once: percentiles of latency samples, the
// steady clock in microseconds, and a process's memory and CPU from /proc.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace anteroom::load {

using SteadyClock = std::chrono::steady_clock;

// Microseconds on the steady clock since an arbitrary start (the same in every thread).
inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

// The p-quantile (0..1, nearest rank) of samples in microseconds, in milliseconds; 0 when there
// are none. Reorders `us`.
template <typename T>
double PercentileMs(std::vector<T>& us, double p) {
  if (us.empty()) return 0;
  size_t k = std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())));
  std::nth_element(us.begin(), us.begin() + static_cast<long>(k), us.end());
  return static_cast<double>(us[k]) / 1000.0;
}

// VmRSS of /proc/PID/status in KiB; -1 when it cannot be read.
int64_t RssKb(const std::string& status_path);

// CPU seconds of a process (`proc`: "/proc/PID" or "/proc/self"): the time every live thread has
// run (task/*/schedstat, nanoseconds). The clock ticks of /proc/PID/stat undercount a busy
// process by up to 3x on a tickless VM, so they are only the fallback. -1 when neither reads.
double CpuSeconds(const std::string& proc);

}  // namespace anteroom::load
