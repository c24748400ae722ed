#include "http/tls_context.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "common/openssl_error.h"

namespace anteroom::http {

namespace ssl = boost::asio::ssl;

namespace {

// TLS 1.2's suites of Mozilla's "intermediate" configuration (TLS 1.3's are OpenSSL's defaults,
// all of them AEAD): ECDHE key exchange, AES-GCM or ChaCha20-Poly1305.
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// ALPN's wire form: each name after its length.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

[[noreturn]] void Fail(std::string_view what, const std::string& file) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, file, OpenSslError()));
}

// HTTP/1.1 is all this server speaks. A client that offers ALPN without it (h2 only) is refused
// with no_application_protocol, as RFC 7301 3.2 asks; one that offers none goes on without.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kAlpnHttp11, sizeof kAlpnHttp11, in, in_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

std::shared_ptr<ssl::context> MakeServerTlsContext(const TlsFiles& files) {
  auto tls = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = tls->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) Fail("tls ciphers", kTls12Ciphers);
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, nullptr);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1) {
    Fail("tls_cert", files.cert);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      throw std::runtime_error(
          fmt::format("tls_key {} does not match tls_cert {}: a renewed "
                      "certificate needs its own key",
                      files.key, files.cert));
    }
    Fail("tls_key", files.key);
  }
  if (!files.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, files.client_ca.c_str(), nullptr) != 1) {
      Fail("tls_client_ca", files.client_ca);
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str());
    if (names == nullptr) Fail("tls_client_ca", files.client_ca);
    SSL_CTX_set_client_CA_list(ctx, names);
    // Asked of every client, required of none: a page's visitors have no certificate, and the
    // router refuses the scopes that need one (a certificate that does not verify fails the
    // handshake).
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    // A resumed session keeps its verified certificate; OpenSSL refuses to resume one without
    // a session context under SSL_VERIFY_PEER.
    static constexpr unsigned char kSessionContext[] = "anteroom";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  }
  return tls;
}

std::string DescribeCertificate(ssl::context& tls) {
  X509* cert = SSL_CTX_get0_certificate(tls.native_handle());
  if (cert == nullptr) return "no certificate";
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
  std::time_t until = CertificateExpiry(tls);
  std::tm utc{};
  gmtime_r(&until, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return fmt::format("{}, valid until {}", subject, date);
}

std::time_t CertificateExpiry(ssl::context& tls) {
  X509* cert = SSL_CTX_get0_certificate(tls.native_handle());
  if (cert == nullptr) return 0;
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return timegm(&tm);
}

bool HasVerifiedPeer(SSL* ssl) {
  return SSL_get0_peer_certificate(ssl) != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
}

}  // namespace anteroom::http
