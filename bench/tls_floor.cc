// What OpenSSL alone costs a TLS server per kept-alive request: one record of the request
// decrypted and one record of the answer encrypted, on a TLS 1.3 session with the listener's
// settings (a P-256 certificate, AES-128-GCM). No socket, no Asio, no anteroom code: the floor
// under "TLS on the listener" in docs/benchmarks.md, where a request's server CPU over TLS is
// compared with plain HTTP.
//
//   tls_floor [--benchmark_...]
//
// The client and server sessions are joined by an in-memory BIO pair; each iteration the
// client writes a request of REQUEST bytes, the server reads it and writes RESPONSE bytes, the
// client reads them. Only the server's two calls are timed (manual time): the client's side,
// its mirror image, is not part of a server's cost. The sizes are those of bench/wrk's room check
// (about 190 B in, 370 B out) and worker loop (about 250 B in, 300 B out).
#include <benchmark/benchmark.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "tls_floor: %s\n", what);
  ERR_print_errors_fp(stderr);
  std::exit(1);
}

// A self-signed P-256 certificate and its key, made here.
struct Identity {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  Identity() {
    key = EVP_EC_gen("P-256");
    cert = X509_new();
    if (key == nullptr || cert == nullptr) Die("cannot make a key");
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("tls-floor"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    if (X509_sign(cert, key, EVP_sha256()) == 0) Die("cannot sign");
  }
  ~Identity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

// A client and a server session, handshaken over a BIO pair.
struct SessionPair {
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL* server = nullptr;
  SSL* client = nullptr;

  explicit SessionPair(const Identity& id) {
    if (server_ctx == nullptr || client_ctx == nullptr) Die("cannot make contexts");
    // As the listener (src/http/tls_context.cc): TLS 1.2 and up; 1.3 negotiated here.
    SSL_CTX_set_min_proto_version(server_ctx, TLS1_2_VERSION);
    SSL_CTX_set_ciphersuites(client_ctx, "TLS_AES_128_GCM_SHA256");
    if (SSL_CTX_use_certificate(server_ctx, id.cert) != 1 ||
        SSL_CTX_use_PrivateKey(server_ctx, id.key) != 1) {
      Die("cannot use the certificate");
    }
    server = SSL_new(server_ctx);
    client = SSL_new(client_ctx);
    BIO* server_bio = nullptr;
    BIO* client_bio = nullptr;
    if (BIO_new_bio_pair(&server_bio, 1 << 16, &client_bio, 1 << 16) != 1) Die("no BIO pair");
    SSL_set_bio(server, server_bio, server_bio);
    SSL_set_bio(client, client_bio, client_bio);
    SSL_set_accept_state(server);
    SSL_set_connect_state(client);
    for (int round = 0; round < 100; ++round) {
      int c = SSL_do_handshake(client);
      int s = SSL_do_handshake(server);
      if (c == 1 && s == 1) break;
    }
    if (SSL_is_init_finished(server) == 0 || SSL_is_init_finished(client) == 0) {
      Die("no handshake");
    }
  }
  ~SessionPair() {
    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(client_ctx);
    SSL_CTX_free(server_ctx);
  }
};

void Exchange(benchmark::State& state) {
  const size_t request_bytes = static_cast<size_t>(state.range(0));
  const size_t response_bytes = static_cast<size_t>(state.range(1));
  Identity id;
  SessionPair pair(id);
  std::string request(request_bytes, 'q'), response(response_bytes, 'a');
  std::vector<char> in(1 << 15);
  for (auto _ : state) {
    if (SSL_write(pair.client, request.data(), static_cast<int>(request.size())) <= 0) {
      Die("client write");
    }
    auto start = std::chrono::steady_clock::now();
    size_t got = 0;
    while (got < request_bytes) {
      int n = SSL_read(pair.server, in.data(), static_cast<int>(in.size()));
      if (n <= 0) Die("server read");
      got += static_cast<size_t>(n);
    }
    if (SSL_write(pair.server, response.data(), static_cast<int>(response.size())) <= 0) {
      Die("server write");
    }
    auto end = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    got = 0;
    while (got < response_bytes) {
      int n = SSL_read(pair.client, in.data(), static_cast<int>(in.size()));
      if (n <= 0) Die("client read");
      got += static_cast<size_t>(n);
    }
  }
  state.SetLabel(std::string(SSL_get_version(pair.server)) + " " +
                 SSL_CIPHER_get_name(SSL_get_current_cipher(pair.server)));
}

BENCHMARK(Exchange)
    ->ArgNames({"request", "response"})
    ->Args({190, 370})  // room check
    ->Args({250, 300})  // worker loop
    ->Args({250, 4000})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
