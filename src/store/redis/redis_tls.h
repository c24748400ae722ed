#pragma once
// TLS to Redis (`rediss://`): the OpenSSL context every connection of a store shares, and what
// each connection sets on its own session. Asio's ssl::stream over the connection's own socket,
// not hiredis_ssl: hiredis is only the RESP reader here (docs/design.md, "Redis over TLS").
//
// The server's certificate is always verified: against the system's trust store, or only the
// CA of `ca_file` when given; its name (or IP address) must match the URL's host. TLS 1.2 at
// least. A client certificate (`cert_file` + `key_file`) is sent when given, for Redis's
// `tls-auth-clients yes`.

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "store/redis/redis_url.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

typedef struct ssl_st SSL;

namespace anteroom::store::redis {

struct RedisTlsFiles {
  std::string ca_file;    // PEM: the CAs to trust instead of the system's
  std::string cert_file;  // PEM: this client's certificate (chain)
  std::string key_file;   // PEM: its private key
  bool empty() const { return ca_file.empty() && cert_file.empty() && key_file.empty(); }
};

// The context for `files`. Throws std::runtime_error, naming the file and what is wrong with it,
// when one cannot be read or the key does not match the certificate.
std::shared_ptr<boost::asio::ssl::context> MakeRedisTlsContext(const RedisTlsFiles& files);

// The context every connection of a store makes its sessions from. Replace (SIGHUP: a renewed
// client certificate, another CA) puts a new one in place for the handshakes that start from
// then on; an open connection keeps the session it has, and a session keeps the context it was
// made from alive. Thread-safe: shards on several threads connect at any time.
class RedisTlsContext {
 public:
  explicit RedisTlsContext(std::shared_ptr<boost::asio::ssl::context> context);
  std::shared_ptr<boost::asio::ssl::context> Current() const;
  void Replace(std::shared_ptr<boost::asio::ssl::context> context);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // never null
};

// The context a store at `url` connects with: null for redis:// (files must then be empty: TLS
// settings with a plain URL are refused rather than silently unused). Throws as above.
std::shared_ptr<RedisTlsContext> TlsContextFor(const RedisUrl& url, const RedisTlsFiles& files);

// Whether `problem` (a handshake's failure; "" once one succeeds) is news for `server`
// ("host:port") in this process, so that it is logged once however many connections (a shard's
// each, the subscriber's) meet it. Thread-safe.
bool TlsProblemIsNews(const std::string& server, const std::string& problem);

// Sets on one session what its server must prove: `host`'s name (also sent as SNI) or, for an
// IP address, that address among the certificate's IP SANs. False when OpenSSL refuses it.
bool ExpectServer(SSL* ssl, const std::string& host);

// Decrypts into `out` (up to `room` bytes) what `ssl` has already received, in its buffers or
// its BIO, without reading the transport; the number of bytes. A failure (the peer's
// close_notify, a bad record) stops it: the next read of the stream reports it.
size_t ReadBuffered(SSL* ssl, char* out, size_t room);

// Why a handshake on `ssl` failed, for the log and the 503's cause: the certificate check's
// verdict when it was refused ("certificate verify failed: hostname mismatch"), else `what`
// (the transport's or OpenSSL's message).
std::string HandshakeFailure(SSL* ssl, const std::string& what);

}  // namespace anteroom::store::redis
