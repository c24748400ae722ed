#pragma once
// Test support for the hostile-client suite (tests/integration/hostile_*_test.cc): the
// server's memory from /proc, and a well-behaved client that keeps asking throughout an attack
// and records how long each answer took.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace anteroom::testing {

// Built with AddressSanitizer (the server then is too): RSS says little (freed memory waits in
// ASan's quarantine, shadow memory doubles what is held), and the sanitizers' own checks need
// file descriptors (UBSan's vptr check opens a pipe), so tests at the descriptor limit or of
// RSS bounds skip those parts there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// VmRSS of a process in KiB (0 if it cannot be read).
size_t RssKiB(pid_t pid);
// File descriptors a process has open (-1 if they cannot be listed).
int OpenFds(pid_t pid);

struct ProbeStats {
  size_t answered = 0;  // answers with the status the probe expected
  size_t failed = 0;    // anything else: a transport error, an unexpected status
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  std::string first_failure;
};

// Runs `ask` in a loop on a thread of its own (every `every`) until Stop(): each call returns
// an empty string when it was answered as expected, or what went wrong. The latency of every
// call is recorded. Bounded: at most `max_calls` calls.
class GoodClient {
 public:
  GoodClient(std::function<std::string()> ask,
             std::chrono::milliseconds every = std::chrono::milliseconds(10),
             size_t max_calls = 100'000);
  ~GoodClient();
  ProbeStats Stop();

 private:
  std::function<std::string()> ask_;
  std::chrono::milliseconds every_;
  size_t max_calls_;
  std::atomic<bool> stop_{false};
  std::vector<double> latencies_ms_;
  size_t failed_ = 0;
  std::string first_failure_;
  std::thread thread_;
};

}  // namespace anteroom::testing
