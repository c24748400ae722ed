#include "store/log/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace anteroom::store::log {
namespace {

TEST(Crc32cTest, BothPathsGiveTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32cPortable(""), 0u);
}

TEST(Crc32cTest, BothPathsAgreeAndChainOnEveryLengthAndSplit) {
  std::mt19937 rng(7);
  std::string data(300, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n = 0; n <= data.size(); n += 7) {
    std::string_view s(data.data(), n);
    uint32_t whole = Crc32c(s);
    ASSERT_EQ(Crc32cPortable(s), whole) << n;
    size_t cut = n / 3;
    ASSERT_EQ(Crc32c(s.substr(cut), Crc32c(s.substr(0, cut))), whole) << n;
    ASSERT_EQ(Crc32cPortable(s.substr(cut), Crc32cPortable(s.substr(0, cut))), whole) << n;
  }
}

}  // namespace
}  // namespace anteroom::store::log
