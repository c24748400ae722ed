// The one lease codec of both backends: what it writes reads back; forged, moved, damaged and
// non-canonical leases do not.
#include "core/lease_codec.h"

#include <gtest/gtest.h>

#include <string>

#include "core/hmac.h"

namespace anteroom::core {
namespace {

class LeaseCodecTest : public ::testing::Test {
 protected:
  Hmac key_{"lease-codec-test-key"};
  LeaseMac mac_{key_};
};

TEST_F(LeaseCodecTest, ALeaseReadsBackAsItsJobAndDelivery) {
  std::string lease = EncodeLease(mac_, "q", 42, 3);
  EXPECT_EQ(lease.substr(0, 5), "42.3.");
  EXPECT_EQ(lease.size(), 5u + 16u) << "a 12-byte tag in base64url: 16 characters";
  std::optional<LeaseRef> ref = DecodeLease(mac_, "q", lease);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->id, 42u);
  EXPECT_EQ(ref->delivery, 3u);
  std::string big = EncodeLease(mac_, "q", UINT64_MAX, UINT64_MAX);
  ref = DecodeLease(mac_, "q", big);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->id, UINT64_MAX);
  EXPECT_EQ(ref->delivery, UINT64_MAX);
}

TEST_F(LeaseCodecTest, TheSameInputsMakeTheSameLeaseWhateverTheMacObject) {
  LeaseMac other(key_);  // what another process (or backend) with the same key makes
  EXPECT_EQ(EncodeLease(mac_, "q", 7, 1), EncodeLease(other, "q", 7, 1));
  EXPECT_TRUE(DecodeLease(other, "q", EncodeLease(mac_, "q", 7, 1)).has_value());
  Hmac another_key("another-key");
  LeaseMac stranger(another_key);
  EXPECT_FALSE(DecodeLease(stranger, "q", EncodeLease(mac_, "q", 7, 1)).has_value());
}

TEST_F(LeaseCodecTest, ALeaseBelongsToItsQueueJobAndDelivery) {
  std::string lease = EncodeLease(mac_, "q", 7, 1);
  EXPECT_FALSE(DecodeLease(mac_, "other", lease)) << "another queue";
  std::string tag = lease.substr(lease.rfind('.') + 1);
  EXPECT_FALSE(DecodeLease(mac_, "q", "8.1." + tag)) << "another job";
  EXPECT_FALSE(DecodeLease(mac_, "q", "7.2." + tag)) << "another delivery";
  EXPECT_FALSE(DecodeLease(mac_, "q", "07.1." + tag)) << "the signed text is the canonical one";
  EXPECT_FALSE(DecodeLease(mac_, "q/7", "1." + tag)) << "the separator is not ambiguous";
}

TEST_F(LeaseCodecTest, DamagedLeasesAreRefused) {
  std::string lease = EncodeLease(mac_, "q", 7, 1);
  for (size_t i = 0; i < lease.size(); ++i) {
    std::string bad = lease;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(DecodeLease(mac_, "q", bad)) << bad;
  }
  for (std::string bad :
       {std::string(), std::string("."), std::string(".."), std::string("7.1"), std::string("7.1."),
        std::string("x.1.abc"), std::string("7.x.abc"), std::string("-7.1.abc"),
        std::string("+7.1.abc"), std::string("18446744073709551616.1.abc"), lease + "A",
        lease.substr(0, lease.size() - 1), lease + ".x"}) {
    EXPECT_FALSE(DecodeLease(mac_, "q", bad)) << bad;
  }
}

}  // namespace
}  // namespace anteroom::core
