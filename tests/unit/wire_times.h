#pragma once
// Times written as people read them, for the tests of schedules: an RFC 3339 text as ms since
// the epoch (a text that does not parse fails the test), and ms back as texts, so an expected
// list of fire times reads as a list of dates.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire_time.h"

namespace anteroom::core {

inline int64_t T(std::string_view rfc3339) {
  const std::optional<int64_t> ms = ParseRfc3339Ms(rfc3339);
  EXPECT_TRUE(ms.has_value()) << rfc3339;
  return ms.value_or(0);
}

inline std::vector<std::string> Texts(const std::vector<int64_t>& times) {
  std::vector<std::string> out;
  for (int64_t t : times) out.push_back(FormatRfc3339Ms(t));
  return out;
}

}  // namespace anteroom::core
