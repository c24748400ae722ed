#include "store/redis/redis_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>

#include <map>
#include <mutex>
#include <stdexcept>

#include "common/openssl_error.h"

namespace anteroom::store::redis {

namespace ssl = boost::asio::ssl;

namespace {
[[noreturn]] void Refuse(const std::string& what, const std::string& file) {
  throw std::runtime_error("redis TLS: cannot use " + what + " " + file + ": " + OpenSslError());
}
}  // namespace

std::shared_ptr<ssl::context> MakeRedisTlsContext(const RedisTlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    throw std::runtime_error(
        "redis TLS: a client certificate needs both --redis-tls-cert and --redis-tls-key");
  }
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX* ctx = context->native_handle();
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    throw std::runtime_error("redis TLS: cannot require TLS 1.2: " + OpenSslError());
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (files.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      throw std::runtime_error("redis TLS: cannot load the system's trust store: " +
                               OpenSslError());
    }
  } else if (SSL_CTX_load_verify_locations(ctx, files.ca_file.c_str(), nullptr) != 1) {
    Refuse("the CA file", files.ca_file);
  }
  if (!files.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
      Refuse("the certificate", files.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
        ERR_clear_error();
        throw std::runtime_error("redis TLS: the key " + files.key_file +
                                 " does not match the certificate " + files.cert_file);
      }
      Refuse("the key", files.key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      throw std::runtime_error("redis TLS: the key " + files.key_file +
                               " does not match the certificate " + files.cert_file);
    }
  }
  return context;
}

RedisTlsContext::RedisTlsContext(std::shared_ptr<ssl::context> context)
    : current_(std::move(context)) {
  if (!current_) throw std::invalid_argument("RedisTlsContext: no context");
}

std::shared_ptr<ssl::context> RedisTlsContext::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void RedisTlsContext::Replace(std::shared_ptr<ssl::context> context) {
  if (!context) throw std::invalid_argument("RedisTlsContext: no context");
  std::lock_guard lock(mu_);
  current_ = std::move(context);
}

std::shared_ptr<RedisTlsContext> TlsContextFor(const RedisUrl& url, const RedisTlsFiles& files) {
  if (url.tls) return std::make_shared<RedisTlsContext>(MakeRedisTlsContext(files));
  if (!files.empty()) {
    throw std::runtime_error(
        "--redis-tls-ca, --redis-tls-cert and --redis-tls-key need a rediss:// (or "
        "rediss+cluster://) store");
  }
  return nullptr;
}

bool TlsProblemIsNews(const std::string& server, const std::string& problem) {
  static std::mutex mu;
  static std::map<std::string, std::string> last;  // server -> the problem last reported
  std::lock_guard lock(mu);
  std::string& held = last[server];
  if (held == problem) return false;
  held = problem;
  return true;
}

bool ExpectServer(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  if (!ec) {
    // An address is matched against the IP SANs; SNI carries names only (RFC 6066).
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  }
  return SSL_set1_host(ssl, host.c_str()) == 1 && SSL_set_tlsext_host_name(ssl, host.c_str()) == 1;
}

size_t ReadBuffered(SSL* ssl, char* out, size_t room) {
  size_t total = 0;
  while (total < room) {
    size_t got = 0;
    ERR_clear_error();
    // A session over a BIO pair (asio's engine) never reaches the socket here: when what is
    // buffered runs out, or ends inside a record, this answers "want read" and stops.
    if (SSL_read_ex(ssl, out + total, room - total, &got) != 1) {
      ERR_clear_error();
      break;
    }
    total += got;
  }
  return total;
}

std::string HandshakeFailure(SSL* ssl, const std::string& what) {
  long verdict = SSL_get_verify_result(ssl);
  if (verdict != X509_V_OK) {
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verdict);
  }
  return what;
}

}  // namespace anteroom::store::redis
