// The TLS settings of a rediss:// store: files refused at start-up with their names, TLS
// settings with a plain URL refused, and what each session is told to expect of its server.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <stdexcept>
#include <string>

#include "store/redis/redis_tls.h"
#include "store/redis/redis_url.h"

namespace anteroom::store::redis {
namespace {

std::string RefusalOf(const RedisTlsFiles& files) {
  try {
    MakeRedisTlsContext(files);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

RedisUrl Url(const char* text) {
  std::string error;
  auto url = ParseRedisUrl(text, error);
  EXPECT_TRUE(url) << error;
  return url.value_or(RedisUrl{});
}

TEST(RedisTls, TheSystemTrustStoreByDefault) {
  auto context = MakeRedisTlsContext({});
  ASSERT_NE(context, nullptr);
  SSL_CTX* ctx = context->native_handle();
  EXPECT_EQ(SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER, SSL_VERIFY_PEER);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
}

TEST(RedisTls, AMissingFileIsRefusedByName) {
  std::string refusal = RefusalOf({"/nonexistent/ca.pem", "", ""});
  EXPECT_NE(refusal.find("the CA file /nonexistent/ca.pem"), std::string::npos) << refusal;
  refusal = RefusalOf({"", "/nonexistent/c.pem", "/nonexistent/c.key"});
  EXPECT_NE(refusal.find("the certificate /nonexistent/c.pem"), std::string::npos) << refusal;
}

TEST(RedisTls, AClientCertificateNeedsItsKey) {
  EXPECT_NE(RefusalOf({"", "c.pem", ""}).find("--redis-tls-key"), std::string::npos);
  EXPECT_NE(RefusalOf({"", "", "c.key"}).find("--redis-tls-cert"), std::string::npos);
}

TEST(RedisTls, PlainUrlsTakeNoContextAndNoTlsSettings) {
  EXPECT_EQ(TlsContextFor(Url("redis://h:1"), {}), nullptr);
  EXPECT_THROW(TlsContextFor(Url("redis://h:1"), RedisTlsFiles{"ca.pem", "", ""}),
               std::runtime_error);
  EXPECT_THROW(TlsContextFor(Url("redis+cluster://h:1"), RedisTlsFiles{"ca.pem", "", ""}),
               std::runtime_error);
  EXPECT_NE(TlsContextFor(Url("rediss://h:1"), {}), nullptr);
}

TEST(RedisTls, ANameIsVerifiedAndSentAsSni) {
  auto context = MakeRedisTlsContext({});
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context->native_handle()), SSL_free);
  ASSERT_TRUE(ExpectServer(ssl.get(), "redis.example.com"));
  const char* sni = SSL_get_servername(ssl.get(), TLSEXT_NAMETYPE_host_name);
  ASSERT_NE(sni, nullptr);
  EXPECT_STREQ(sni, "redis.example.com");
  const char* host = X509_VERIFY_PARAM_get0_host(SSL_get0_param(ssl.get()), 0);
  ASSERT_NE(host, nullptr);
  EXPECT_STREQ(host, "redis.example.com");
}

TEST(RedisTls, AnAddressIsVerifiedAmongIpSansAndNotSentAsSni) {
  auto context = MakeRedisTlsContext({});
  for (const char* address : {"127.0.0.1", "::1"}) {
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context->native_handle()), SSL_free);
    ASSERT_TRUE(ExpectServer(ssl.get(), address)) << address;
    EXPECT_EQ(SSL_get_servername(ssl.get(), TLSEXT_NAMETYPE_host_name), nullptr) << address;
    EXPECT_EQ(X509_VERIFY_PARAM_get0_host(SSL_get0_param(ssl.get()), 0), nullptr) << address;
    char* ip = X509_VERIFY_PARAM_get1_ip_asc(SSL_get0_param(ssl.get()));
    ASSERT_NE(ip, nullptr) << address;
    EXPECT_STREQ(ip, address[0] == ':' ? "0:0:0:0:0:0:0:1" : address);
    OPENSSL_free(ip);
  }
}

}  // namespace
}  // namespace anteroom::store::redis
