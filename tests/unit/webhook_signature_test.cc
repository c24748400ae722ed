// Standard Webhooks signatures (webhook/signature.h): the specification's own test vector (the
// reference libraries' "sign function works": JavaScript, Python, ... share it), vectors computed
// by Python's hmac module, secrets read strictly, and the header of a rotation.

#include "webhook/signature.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace anteroom::webhook {
namespace {

// standard-webhooks/standard-webhooks, libraries/*/tests: "sign function works".
constexpr std::string_view kSpecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr std::string_view kSpecId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kSpecTimestamp = 1614265330;
constexpr std::string_view kSpecPayload = R"({"test": 2432232314})";
constexpr std::string_view kSpecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

// The specification's example message, signed by Python's hmac and base64 modules with the
// keys bytes(range(32)) and bytes(range(100, 164)).
constexpr std::string_view kExampleId = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
constexpr int64_t kExampleTimestamp = 1674087231;
constexpr std::string_view kExampleBody =
    R"({"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z",)"
    R"("data":{"id":"1f81eb52-5198-4599-803e-771906343485"}})";
constexpr std::string_view kSecret32 = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
constexpr std::string_view kSignature32 = "v1,4PMU5Dl90B4kgwxDpwuMZ/cnZ5ztf+Y+kviYQD66rJg=";
constexpr std::string_view kSecret64 =
    "whsec_ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoOEhYaHiImKi4yNjo+QkZKTlJWWl5iZmpucnZ6foKGiow="
    "=";
constexpr std::string_view kSignature64 = "v1,RlgIxW7O7j4hlBTr2zKgHEKl8B3Tz/Q2Y2o3riPMAjU=";

TEST(WebhookSignature, SpecificationTestVector) {
  EXPECT_EQ(SignWebhook(kSpecSecret, kSpecId, kSpecTimestamp, kSpecPayload), kSpecSignature);
}

TEST(WebhookSignature, IndependentVectors) {
  EXPECT_EQ(SignWebhook(kSecret32, kExampleId, kExampleTimestamp, kExampleBody), kSignature32);
  EXPECT_EQ(SignWebhook(kSecret64, kExampleId, kExampleTimestamp, kExampleBody), kSignature64);
}

TEST(WebhookSignature, EveryPartIsSigned) {
  std::string base(*SignWebhook(kSpecSecret, kSpecId, kSpecTimestamp, kSpecPayload));
  EXPECT_NE(SignWebhook(kSpecSecret, "msg_p5jXN8AQM9LWM0D4loKWxJeK", kSpecTimestamp, kSpecPayload),
            base);
  EXPECT_NE(SignWebhook(kSpecSecret, kSpecId, kSpecTimestamp + 1, kSpecPayload), base);
  EXPECT_NE(SignWebhook(kSpecSecret, kSpecId, kSpecTimestamp, R"({"test":2432232314})"), base);
  EXPECT_NE(SignWebhook(kSecret32, kSpecId, kSpecTimestamp, kSpecPayload), base);
}

TEST(WebhookSignature, MalformedSecretsSignNothing) {
  for (std::string_view bad : {
           "", "whsec_",
           "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",         // no prefix
           "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",   // the prefix is lower case
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",    // a length no base64 has
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa-w",   // base64url's alphabet
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS w",  // a space
           "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=",  // padding where none belongs
           "whsec_AAECAwQFBgcICQoLDA0ODw==",           // 16 bytes: under the minimum of 24
           "whsec_"
           "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+"
           "P0A=",                                                // 65
           "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=",  // non-canonical last character
       }) {
    EXPECT_EQ(WebhookSecretKey(bad), std::nullopt) << bad;
    EXPECT_EQ(SignWebhook(bad, kSpecId, kSpecTimestamp, kSpecPayload), std::nullopt) << bad;
  }
}

TEST(WebhookSignature, SecretPaddingIsOptional) {
  EXPECT_EQ(SignWebhook("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", kExampleId,
                        kExampleTimestamp, kExampleBody),
            kSignature32);
  ASSERT_TRUE(WebhookSecretKey(kSecret64));
  EXPECT_EQ(WebhookSecretKey(kSecret64)->size(), 64u);
}

TEST(WebhookSignature, NewSecretsAreFreshAndUsable) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    std::string secret = NewWebhookSecret();
    ASSERT_TRUE(secret.starts_with("whsec_")) << secret;
    auto key = WebhookSecretKey(secret);
    ASSERT_TRUE(key) << secret;
    EXPECT_EQ(key->size(), kNewSecretBytes);
    EXPECT_TRUE(SignWebhook(secret, kSpecId, kSpecTimestamp, kSpecPayload));
    seen.insert(secret);
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST(WebhookSignature, RotationHeaderSignsWithEverySecretInOrder) {
  EXPECT_EQ(
      WebhookSignatureHeader({std::string(kSecret32)}, kExampleId, kExampleTimestamp, kExampleBody),
      kSignature32);
  EXPECT_EQ(WebhookSignatureHeader({std::string(kSecret64), std::string(kSecret32)}, kExampleId,
                                   kExampleTimestamp, kExampleBody),
            std::string(kSignature64) + " " + std::string(kSignature32));
  EXPECT_EQ(WebhookSignatureHeader({}, kExampleId, kExampleTimestamp, kExampleBody), std::nullopt);
  EXPECT_EQ(WebhookSignatureHeader({std::string(kSecret32), "whsec_bad"}, kExampleId,
                                   kExampleTimestamp, kExampleBody),
            std::nullopt);
}

TEST(WebhookSignature, Base64RoundTripsAndRefusesTheUrlAlphabet) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    std::string text = Base64Encode(bytes);
    EXPECT_EQ(text.size() % 4, 0u);
    EXPECT_EQ(Base64Decode(text), bytes) << text;
    bytes.push_back(static_cast<char>(0xf8 + n));
  }
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(Base64Decode("+/8="), "\xfb\xff");
  EXPECT_EQ(Base64Decode("+/8"), "\xfb\xff");
  EXPECT_EQ(Base64Decode("-_8="), std::nullopt);
  EXPECT_EQ(Base64Decode("+/8=="), std::nullopt);
  EXPECT_EQ(Base64Decode("+/==="), std::nullopt);
  EXPECT_EQ(Base64Decode("+/9="), std::nullopt);  // non-canonical
}

}  // namespace
}  // namespace anteroom::webhook
