// The TLS settings of a rediss:// store: files refused at start-up with their names, TLS
// settings with a plain URL refused, and what each session is told to expect of its server;
// ReadBuffered on a session in memory (no socket): every record already here, none waited for.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl/context.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
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

TEST(RedisTls, AReplacedContextServesNewSessionsWhileOldOnesKeepTheirs) {
  auto first = MakeRedisTlsContext({});
  RedisTlsContext holder(first);
  EXPECT_EQ(holder.Current(), first);
  std::shared_ptr<boost::asio::ssl::context> kept = holder.Current();  // an open session's
  auto second = MakeRedisTlsContext({});
  holder.Replace(second);
  EXPECT_EQ(holder.Current(), second);
  EXPECT_EQ(kept, first);
  EXPECT_EQ(first.use_count(), 2);  // `first` and `kept`: the holder let go of it
  EXPECT_THROW(holder.Replace(nullptr), std::invalid_argument);
  EXPECT_EQ(holder.Current(), second);
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

// A client and a server session over two BIO pairs whose outer ends the test shuttles bytes
// between (all of them, or a prefix: a record cut in two), as asio's engine sits on a socket.
class SessionPair {
 public:
  SessionPair() {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    X509* cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("redis"), -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(cert));
    X509_sign(cert, key, EVP_sha256());
    server_ctx_ = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(server_ctx_, cert);
    SSL_CTX_use_PrivateKey(server_ctx_, key);
    X509_free(cert);
    EVP_PKEY_free(key);
    client_ctx_ = SSL_CTX_new(TLS_client_method());  // the chain is not what this test is about
    client_ = SSL_new(client_ctx_);
    server_ = SSL_new(server_ctx_);
    BIO *client_inner = nullptr, *server_inner = nullptr;
    BIO_new_bio_pair(&client_inner, 0, &client_outer_, 0);
    BIO_new_bio_pair(&server_inner, 0, &server_outer_, 0);
    SSL_set_bio(client_, client_inner, client_inner);
    SSL_set_bio(server_, server_inner, server_inner);
    SSL_set_connect_state(client_);
    SSL_set_accept_state(server_);
  }
  ~SessionPair() {
    SSL_free(client_);
    SSL_free(server_);
    BIO_free(client_outer_);
    BIO_free(server_outer_);
    SSL_CTX_free(client_ctx_);
    SSL_CTX_free(server_ctx_);
  }

  bool Handshake() {
    for (int i = 0; i < 20; ++i) {
      int c = SSL_do_handshake(client_);
      int s = SSL_do_handshake(server_);
      Shuttle(client_outer_, server_outer_, SIZE_MAX);
      Shuttle(server_outer_, client_outer_, SIZE_MAX);
      if (c == 1 && s == 1) return true;
    }
    return false;
  }
  // Up to `limit` bytes of what the server wrote, on to the client.
  void ToClient(size_t limit = SIZE_MAX) { Shuttle(server_outer_, client_outer_, limit); }
  size_t Pending() const { return BIO_ctrl_pending(server_outer_); }

  SSL* client() { return client_; }
  SSL* server() { return server_; }

 private:
  static void Shuttle(BIO* from, BIO* to, size_t limit) {
    char buf[4096];
    while (limit > 0) {
      int n = BIO_read(from, buf, static_cast<int>(std::min(sizeof buf, limit)));
      if (n <= 0) return;
      BIO_write(to, buf, n);
      limit -= static_cast<size_t>(n);
    }
  }

  SSL_CTX *server_ctx_ = nullptr, *client_ctx_ = nullptr;
  SSL *client_ = nullptr, *server_ = nullptr;
  BIO *client_outer_ = nullptr, *server_outer_ = nullptr;
};

TEST(RedisTls, ReadBufferedTakesEveryRecordAlreadyHereAndWaitsForNone) {
  SessionPair pair;
  ASSERT_TRUE(pair.Handshake());
  // Three records, as Redis sends three batches of answers.
  for (const char* answer : {"+one\r\n", "+two\r\n", "+three\r\n"}) {
    ASSERT_EQ(SSL_write(pair.server(), answer, static_cast<int>(strlen(answer))),
              static_cast<int>(strlen(answer)));
  }
  pair.ToClient();
  char out[256];
  size_t first = 0;
  ASSERT_EQ(SSL_read_ex(pair.client(), out, sizeof out, &first), 1);
  EXPECT_EQ(std::string(out, first), "+one\r\n");  // one record a read, as asio reads
  size_t rest = ReadBuffered(pair.client(), out, sizeof out);
  EXPECT_EQ(std::string(out, rest), "+two\r\n+three\r\n");
  EXPECT_EQ(ReadBuffered(pair.client(), out, sizeof out), 0u);  // nothing more: no wait

  // A record cut in two: nothing until its end comes, then all of it.
  ASSERT_EQ(SSL_write(pair.server(), "+four\r\n", 7), 7);
  size_t record = pair.Pending();
  pair.ToClient(record / 2);
  EXPECT_EQ(ReadBuffered(pair.client(), out, sizeof out), 0u);
  pair.ToClient();
  size_t got = ReadBuffered(pair.client(), out, sizeof out);
  EXPECT_EQ(std::string(out, got), "+four\r\n");

  // It stops at `room`; the rest stays for the next read.
  ASSERT_EQ(SSL_write(pair.server(), "+five\r\n", 7), 7);
  pair.ToClient();
  EXPECT_EQ(ReadBuffered(pair.client(), out, 3), 3u);
  got = ReadBuffered(pair.client(), out, sizeof out);
  EXPECT_EQ(std::string(out, got), "ve\r\n");
}

}  // namespace
}  // namespace anteroom::store::redis
