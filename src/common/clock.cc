#include "common/clock.h"

namespace anteroom {

SystemClock::SystemClock()
    : wall_at_start_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()),
      steady_at_start_(std::chrono::steady_clock::now()) {}

int64_t SystemClock::NowMs() const {
  auto elapsed = std::chrono::steady_clock::now() - steady_at_start_;
  return wall_at_start_ms_ + std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
}

}  // namespace anteroom
