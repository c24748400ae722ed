#pragma once
// The listener's TLS settings, read from PEM files into an OpenSSL context (through Asio):
// TLS 1.2 and 1.3 only, forward-secret AEAD ciphers (Mozilla's "intermediate" list), ALPN
// http/1.1, no renegotiation, no compression. With a client CA the server asks every client
// for a certificate without requiring one; the router decides which scopes need it.

#include <boost/asio/ssl/context.hpp>

#include <ctime>
#include <memory>
#include <string>

#include <openssl/ssl.h>

namespace anteroom::http {

struct TlsFiles {
  std::string cert;       // the certificate chain, leaf first (PEM)
  std::string key;        // its private key (PEM, unencrypted)
  std::string client_ca;  // empty: no client certificates are asked for
};

// Reads the files. Throws std::runtime_error naming the file and OpenSSL's reason when one
// cannot be read, or the key is not the certificate's.
std::shared_ptr<boost::asio::ssl::context> MakeServerTlsContext(const TlsFiles& files);

// What the operator is shown of the context's certificate: "subject, valid until DATE".
std::string DescribeCertificate(boost::asio::ssl::context& tls);
// Its notAfter as a Unix time (0 when there is none).
std::time_t CertificateExpiry(boost::asio::ssl::context& tls);

// After a handshake: the client showed a certificate that the client CA verified.
bool HasVerifiedPeer(SSL* ssl);

}  // namespace anteroom::http
