// `anteroom serve --tls-cert --tls-key` as a real process, driven by Debian's `curl` and
// `openssl s_client` and by a Beast WebSocket client: TLS 1.2 and 1.3 only, ALPN http/1.1,
// keep-alive, a long poll whose client hangs up, WSS, client certificates for the admin and
// queue scopes, and a certificate reloaded on SIGHUP while an old connection goes on.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_process.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;

constexpr char kAdminKey[] = "tls-test-admin-key";

// A CA, two server certificates it signed (for 127.0.0.1 and localhost; the second one replaces
// the first on a reload) and one for another name, a client certificate it signed, and a client
// certificate of another CA. Made once per test by Debian's openssl, P-256 keys.
class Certificates {
 public:
  explicit Certificates(const std::filesystem::path& dir) : dir_(dir) {
    Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=anteroom-test-ca -keyout ca.key -out ca.pem");
    Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=rogue-ca -keyout rogue-ca.key -out rogue-ca.pem");
    Write("server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
    Write("client.ext", "extendedKeyUsage=clientAuth\n");
    Write("elsewhere.ext", "subjectAltName=DNS:elsewhere.example\nextendedKeyUsage=serverAuth\n");
    Sign("server-one", "ca", "server.ext");
    Sign("server-elsewhere", "ca", "elsewhere.ext");
    Sign("server-two", "ca", "server.ext");
    Sign("client", "ca", "client.ext");
    Sign("rogue-client", "rogue-ca", "client.ext");
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  bool ok() const { return ok_; }
  const std::string& log() const { return log_; }

 private:
  void Sign(const std::string& name, const std::string& ca, const std::string& ext) {
    Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + name +
        " -keyout " + name + ".key -out " + name + ".csr");
    Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
        ".key -CAcreateserial -days 2 -extfile " + ext + " -out " + name + ".pem");
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  void Run(const std::string& command) {
    ProgramResult r = RunProgram({"/bin/sh", "-c", "cd '" + dir_.string() + "' && " + command});
    if (r.exit_code != 0) {
      ok_ = false;
      log_ += command + "\n" + r.out;
    }
  }

  std::filesystem::path dir_;
  bool ok_ = true;
  std::string log_;
};

struct CurlResult {
  int exit_code = -1;
  int status = 0;
  std::string http_version;
  std::string body;
  std::string out;  // everything curl printed
};

class TlsServeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.ok()) << certs_.log(); }

  std::vector<std::string> TlsArgs(const std::string& cert = "server-one") {
    // The served files are copies: the reload test rewrites them.
    std::filesystem::copy_file(certs_.Path(cert + ".pem"), certs_.Path("served.pem"),
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(certs_.Path(cert + ".key"), certs_.Path("served.key"),
                               std::filesystem::copy_options::overwrite_existing);
    return {"--tls-cert", certs_.Path("served.pem"), "--tls-key", certs_.Path("served.key")};
  }

  // `curl --cacert ca.pem ARGS... URL` (https://127.0.0.1:PORT + path); the status, the HTTP
  // version and the body from -w.
  CurlResult Curl(uint16_t port, const std::string& path, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"/usr/bin/curl",      "-sS", "--max-time", "10", "--cacert",
                                     certs_.Path("ca.pem")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("-w");
    argv.push_back("\n%{http_code} %{http_version}");
    argv.push_back("https://127.0.0.1:" + std::to_string(port) + path);
    ProgramResult r = RunProgram(argv);
    CurlResult c;
    c.exit_code = r.exit_code;
    c.out = r.out;
    size_t last = r.out.rfind('\n');
    if (last != std::string::npos) {
      std::string tail = r.out.substr(last + 1);
      c.body = r.out.substr(0, last);
      size_t space = tail.find(' ');
      if (space != std::string::npos) {
        c.status = std::atoi(tail.substr(0, space).c_str());
        c.http_version = tail.substr(space + 1);
      }
    }
    return c;
  }

  // `openssl s_client -connect 127.0.0.1:PORT ARGS...` with stdin at its end: the handshake,
  // then a close. Its exit code and everything it printed.
  ProgramResult SClient(uint16_t port, std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/openssl",
                                     "s_client",
                                     "-connect",
                                     "127.0.0.1:" + std::to_string(port),
                                     "-CAfile",
                                     certs_.Path("ca.pem"),
                                     "-verify_return_error"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv, std::chrono::seconds(10));
  }

  TempDir dir_{"anteroom-tls"};
  Certificates certs_{dir_.path()};
};

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST_F(TlsServeTest, AnswersHttpsToAClientThatTrustsTheCa) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  EXPECT_EQ(server.url(), "https://127.0.0.1:" + std::to_string(server.port()));
  CurlResult ready = Curl(server.port(), "/readyz");
  EXPECT_EQ(ready.exit_code, 0) << ready.out;
  EXPECT_EQ(ready.status, 200) << ready.out;
  EXPECT_EQ(ready.http_version, "1.1");
  // A client that prefers HTTP/2 is given HTTP/1.1 by ALPN.
  CurlResult h2 = Curl(server.port(), "/readyz", {"--http2"});
  EXPECT_EQ(h2.status, 200) << h2.out;
  EXPECT_EQ(h2.http_version, "1.1") << h2.out;
  // Without the CA the certificate is not trusted (curl's 60: peer certificate cannot be
  // authenticated).
  ProgramResult untrusted = RunProgram({"/usr/bin/curl", "-sS", "--max-time", "10",
                                        "https://127.0.0.1:" + std::to_string(server.port())});
  EXPECT_EQ(untrusted.exit_code, 60) << untrusted.out;
  // Several requests on one kept-alive connection: curl reuses it for every URL given.
  ProgramResult three = RunProgram(
      {"/usr/bin/curl", "-sS", "-v", "--max-time", "10", "--cacert", certs_.Path("ca.pem"),
       "https://127.0.0.1:" + std::to_string(server.port()) + "/readyz",
       "https://127.0.0.1:" + std::to_string(server.port()) + "/healthz",
       "https://127.0.0.1:" + std::to_string(server.port()) + "/readyz"});
  EXPECT_EQ(three.exit_code, 0) << three.out;
  size_t reused = 0;
  for (size_t at = three.out.find("Re-using existing connection"); at != std::string::npos;
       at = three.out.find("Re-using existing connection", at + 1)) {
    ++reused;
  }
  EXPECT_EQ(reused, 2u) << three.out;
  // The certificate's end, for the alert that fires two weeks before it (made for 2 days).
  CurlResult metrics = Curl(server.port(), "/metrics");
  std::string_view family = "\nanteroom_tls_certificate_expiry_timestamp_seconds ";
  size_t at = metrics.body.find(family);
  ASSERT_NE(at, std::string::npos) << metrics.out;
  int64_t expiry = std::atoll(metrics.body.c_str() + at + family.size());
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  EXPECT_GT(expiry, now + 86400);
  EXPECT_LE(expiry, now + 2 * 86400 + 60);
}

TEST_F(TlsServeTest, SpeaksOnlyTls12And13WithModernCiphers) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  ProgramResult v13 = SClient(server.port(), {"-tls1_3"});
  EXPECT_EQ(v13.exit_code, 0) << v13.out;
  EXPECT_TRUE(Contains(v13.out, "New, TLSv1.3, Cipher is TLS_")) << v13.out;
  EXPECT_TRUE(Contains(v13.out, "Verify return code: 0 (ok)")) << v13.out;
  ProgramResult v12 = SClient(server.port(), {"-tls1_2"});
  EXPECT_EQ(v12.exit_code, 0) << v12.out;
  EXPECT_TRUE(Contains(v12.out, "New, TLSv1.2, Cipher is ECDHE-ECDSA-")) << v12.out;
  // TLS 1.1 (allowed by the client at security level 0) is refused.
  ProgramResult v11 = SClient(server.port(), {"-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"});
  EXPECT_NE(v11.exit_code, 0) << v11.out;
  EXPECT_FALSE(Contains(v11.out, "New, TLSv1.1")) << v11.out;
  // TLS 1.2 without forward secrecy or with CBC: refused.
  for (const char* weak : {"AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-SHA"}) {
    ProgramResult r = SClient(server.port(), {"-tls1_2", "-cipher", weak});
    EXPECT_NE(r.exit_code, 0) << weak << "\n" << r.out;
  }
}

TEST_F(TlsServeTest, NegotiatesHttp11ByAlpnAndRefusesOnlyH2) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  ProgramResult both = SClient(server.port(), {"-alpn", "h2,http/1.1"});
  EXPECT_EQ(both.exit_code, 0) << both.out;
  EXPECT_TRUE(Contains(both.out, "ALPN protocol: http/1.1")) << both.out;
  ProgramResult h2 = SClient(server.port(), {"-alpn", "h2"});
  EXPECT_NE(h2.exit_code, 0) << h2.out;
  EXPECT_TRUE(Contains(h2.out, "no application protocol")) << h2.out;
}

TEST_F(TlsServeTest, PlainHttpOnTheTlsPortGetsNoAnswerAndHarmsNothing) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  std::string answer = RawExchange(server.port(), RawRequest("GET", "/readyz"));
  EXPECT_FALSE(Contains(answer, "HTTP/1.1")) << answer;
  // A handshake that never finishes is closed within the head timeout.
  ServerProcess quick([&] {
    auto args = TlsArgs();
    args.insert(args.end(), {"--head-timeout-ms", "300"});
    return args;
  }());
  ASSERT_TRUE(quick.started()) << quick.error();
  RawConnection silent(quick.port());
  ASSERT_TRUE(silent.connected());
  std::string data;
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.ReadUntilClosed(data, std::chrono::seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(Curl(server.port(), "/readyz").status, 200);
}

// A long poll over TLS whose client hangs up leaves the line at once: the job pushed after is
// given to the next fetch, not to the gone one.
TEST_F(TlsServeTest, ALongPollWhoseClientHangsUpGetsNoJob) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  std::vector<std::string> json = {"-H", "Content-Type: application/json"};
  auto post = [&](const std::string& path, const std::string& body, std::vector<std::string> a) {
    a.insert(a.end(), json.begin(), json.end());
    a.insert(a.end(), {"-d", body});
    return Curl(server.port(), path, a);
  };
  // The parked fetch's client gives up after 1 s of a 20 s wait.
  CurlResult gone =
      post("/v1/queues/q/fetch", R"({"worker":"w1","wait_ms":20000})", {"--max-time", "1"});
  EXPECT_EQ(gone.exit_code, 28) << gone.out;  // curl's timeout
  std::this_thread::sleep_for(milliseconds(200));
  CurlResult pushed = post("/v1/queues/q/jobs", R"({"payload":{"n":1}})", {});
  EXPECT_EQ(pushed.status, 201) << pushed.out;
  CurlResult fetched = post("/v1/queues/q/fetch", R"({"worker":"w2","wait_ms":2000})", {});
  EXPECT_EQ(fetched.status, 200) << fetched.out;
  EXPECT_TRUE(Contains(fetched.body, R"("payload":{"n":1})")) << fetched.body;
}

// A TLS client (Beast over asio::ssl) that trusts the test CA, with an optional certificate.
class TlsClient {
 public:
  TlsClient(const Certificates& certs, uint16_t port, const std::string& cert = "")
      : tls_(ssl::context::tls_client) {
    tls_.load_verify_file(certs.Path("ca.pem"));
    tls_.set_verify_mode(ssl::verify_peer);
    if (!cert.empty()) {
      tls_.use_certificate_chain_file(certs.Path(cert + ".pem"));
      tls_.use_private_key_file(certs.Path(cert + ".key"), ssl::context::pem);
    }
    // Made once the context is complete (a stream copies its certificate at construction);
    // never assigned over: Asio's move assignment would leak the session it replaces.
    stream_.emplace(io_, tls_);
    beast::error_code ec;
    stream_->next_layer().connect({net::ip::make_address("127.0.0.1"), port}, ec);
    if (ec) return;
    timeval tv{5, 0};  // every read and write is bounded
    setsockopt(stream_->next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(stream_->next_layer().native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    stream_->handshake(ssl::stream_base::client, ec);
    connected_ = !ec;
  }
  bool connected() const { return connected_; }

  // One request on this connection (kept alive): the status, or 0 when it failed.
  // `pause`: the answer is read only that long after the request is sent.
  int Request(bhttp::verb method, const std::string& target, const std::string& body = {},
              const std::string& key = {}, milliseconds pause = milliseconds(0)) {
    bhttp::request<bhttp::string_body> req{method, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    if (!key.empty()) req.set(bhttp::field::authorization, "Bearer " + key);
    if (!body.empty()) {
      req.set(bhttp::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    beast::error_code ec;
    bhttp::write(*stream_, req, ec);
    if (ec) return 0;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
    bhttp::response<bhttp::string_body> res;
    bhttp::read(*stream_, buffer_, res, ec);
    if (ec) return 0;
    last_body_ = res.body();
    return res.result_int();
  }
  // `bytes` (whole requests) in one write, then `answers` answers read: their statuses.
  std::vector<int> Pipelined(const std::string& bytes, size_t answers) {
    std::vector<int> statuses;
    beast::error_code ec;
    net::write(*stream_, net::buffer(bytes), ec);
    if (ec) return statuses;
    for (size_t i = 0; i < answers; ++i) {
      bhttp::response<bhttp::string_body> res;
      bhttp::read(*stream_, buffer_, res, ec);
      if (ec) break;
      statuses.push_back(res.result_int());
    }
    return statuses;
  }
  // A TLS 1.3 KeyUpdate that asks the server for one of its own, sent with the next write.
  bool KeyUpdate() {
    return SSL_key_update(stream_->native_handle(), SSL_KEY_UPDATE_REQUESTED) == 1;
  }
  const std::string& last_body() const { return last_body_; }
  // The subject of the server's certificate.
  std::string PeerSubject() {
    X509* cert = SSL_get0_peer_certificate(stream_->native_handle());
    if (cert == nullptr) return "";
    char subject[256];
    X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
    return subject;
  }

 private:
  net::io_context io_;
  ssl::context tls_;
  std::optional<ssl::stream<tcp::socket>> stream_;
  beast::flat_buffer buffer_;
  std::string last_body_;
  bool connected_ = false;
};

// The server's TLS stream (src/http/tls_stream.h) on its less common paths: requests pipelined
// in one record, KeyUpdates from the client (the server answers each with its own) between
// requests, large request bodies, and an answer of several MB that the client starts reading
// only after a pause (the server's writes wait for the socket with a record half sent).
TEST_F(TlsServeTest, PipelinedRequestsKeyUpdatesAndALargeAnswerReadLate) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  TlsClient client(certs_, server.port());
  ASSERT_TRUE(client.connected());
  std::string three;
  for (int i = 0; i < 3; ++i) three += "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(client.Pipelined(three, 3), (std::vector<int>{200, 200, 200}));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.KeyUpdate());
    EXPECT_EQ(client.Request(bhttp::verb::get, "/readyz"), 200) << i;
  }
  std::string filler(900 * 1024, 'x');
  for (int i = 0; i < 6; ++i) {
    int pushed = client.Request(bhttp::verb::post, "/v1/queues/big/jobs",
                                R"({"payload":{"filler":")" + filler + R"("}})");
    ASSERT_TRUE(pushed == 200 || pushed == 201) << pushed << " " << client.last_body();
  }
  EXPECT_EQ(client.Request(bhttp::verb::post, "/v1/queues/big/fetch", R"({"worker":"w","max":6})",
                           {}, milliseconds(500)),
            200);
  EXPECT_GT(client.last_body().size(), 6 * filler.size());
  ASSERT_TRUE(client.KeyUpdate());
  EXPECT_EQ(client.Request(bhttp::verb::get, "/readyz"), 200);
}

TEST_F(TlsServeTest, ALiveChannelRunsOverWss) {
  ServerProcess server(TlsArgs());
  ASSERT_TRUE(server.started()) << server.error();
  {
    TlsClient admin(certs_, server.port());
    ASSERT_TRUE(admin.connected());
    int created = admin.Request(bhttp::verb::put, "/v1/rooms/r", R"({"capacity":1})");
    ASSERT_TRUE(created == 200 || created == 201) << created << " " << admin.last_body();
  }
  net::io_context io;
  ssl::context tls(ssl::context::tls_client);
  tls.load_verify_file(certs_.Path("ca.pem"));
  tls.set_verify_mode(ssl::verify_peer);
  websocket::stream<ssl::stream<tcp::socket>> ws(io, tls);
  beast::get_lowest_layer(ws).connect({net::ip::make_address("127.0.0.1"), server.port()});
  timeval tv{5, 0};
  setsockopt(beast::get_lowest_layer(ws).native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ws.next_layer().handshake(ssl::stream_base::client);
  ws.handshake("127.0.0.1:" + std::to_string(server.port()), "/v1/rooms/r/ws");
  beast::flat_buffer buffer;
  ws.read(buffer);
  std::string first = beast::buffers_to_string(buffer.data());
  EXPECT_TRUE(Contains(first, R"("type":"admitted")") || Contains(first, R"("status")")) << first;
  // A second one waits behind it and is told its place.
  websocket::stream<ssl::stream<tcp::socket>> second(io, tls);
  beast::get_lowest_layer(second).connect({net::ip::make_address("127.0.0.1"), server.port()});
  setsockopt(beast::get_lowest_layer(second).native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv,
             sizeof tv);
  second.next_layer().handshake(ssl::stream_base::client);
  second.handshake("127.0.0.1:" + std::to_string(server.port()), "/v1/rooms/r/ws");
  beast::flat_buffer buffer2;
  second.read(buffer2);
  std::string waiting = beast::buffers_to_string(buffer2.data());
  EXPECT_TRUE(Contains(waiting, R"("position":1)")) << waiting;
  ws.close(websocket::close_code::normal);
  second.close(websocket::close_code::normal);
}

TEST_F(TlsServeTest, AdminAndQueueRoutesNeedATrustedClientCertificate) {
  auto args = TlsArgs();
  args.insert(args.end(), {"--tls-client-ca", certs_.Path("ca.pem")});
  ServerProcess server(args, {{"ANTEROOM_ADMIN_KEY", kAdminKey}});
  ASSERT_TRUE(server.started()) << server.error();
  TlsClient anonymous(certs_, server.port());
  ASSERT_TRUE(anonymous.connected());
  EXPECT_EQ(anonymous.Request(bhttp::verb::get, "/readyz"), 200);  // public: no certificate
  EXPECT_EQ(anonymous.Request(bhttp::verb::put, "/v1/rooms/r", R"({"capacity":1})", kAdminKey),
            403);
  EXPECT_TRUE(Contains(anonymous.last_body(), "client_certificate_required"))
      << anonymous.last_body();
  EXPECT_EQ(
      anonymous.Request(bhttp::verb::post, "/v1/queues/q/jobs", R"({"payload":1})", kAdminKey),
      403);
  TlsClient trusted(certs_, server.port(), "client");
  ASSERT_TRUE(trusted.connected());
  int created = trusted.Request(bhttp::verb::put, "/v1/rooms/r", R"({"capacity":1})", kAdminKey);
  EXPECT_TRUE(created == 200 || created == 201) << created << " " << trusted.last_body();
  EXPECT_EQ(trusted.Request(bhttp::verb::post, "/v1/queues/q/jobs", R"({"payload":1})", kAdminKey),
            201);
  // The certificate is not a key: without the key the route is still refused.
  EXPECT_EQ(trusted.Request(bhttp::verb::put, "/v1/rooms/s", R"({"capacity":1})"), 401);
  // A public route answers as to anyone: the admin key shows nothing more without a certificate.
  EXPECT_EQ(anonymous.Request(bhttp::verb::get, "/readyz"), 200);
  // A certificate of another CA fails the handshake.
  TlsClient rogue(certs_, server.port(), "rogue-client");
  bool refused = !rogue.connected() || rogue.Request(bhttp::verb::get, "/readyz") == 0;
  EXPECT_TRUE(refused);
  // curl with the client certificate too.
  CurlResult with_cert =
      Curl(server.port(), "/v1/queues",
           {"--cert", certs_.Path("client.pem"), "--key", certs_.Path("client.key"), "-H",
            std::string("Authorization: Bearer ") + kAdminKey});
  EXPECT_EQ(with_cert.status, 200) << with_cert.out;
}

TEST_F(TlsServeTest, SighupReloadsTheCertificateAndKeepsOpenConnections) {
  ServerProcess server(TlsArgs("server-one"));
  ASSERT_TRUE(server.started()) << server.error();
  TlsClient old(certs_, server.port());
  ASSERT_TRUE(old.connected());
  EXPECT_TRUE(Contains(old.PeerSubject(), "CN=server-one")) << old.PeerSubject();
  EXPECT_EQ(old.Request(bhttp::verb::get, "/readyz"), 200);
  // The renewed pair is written over the served files, then SIGHUP.
  TlsArgs("server-two");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  std::string subject;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    TlsClient fresh(certs_, server.port());
    subject = fresh.PeerSubject();
    if (Contains(subject, "CN=server-two")) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(Contains(subject, "CN=server-two")) << subject << "\n" << server.Errors();
  EXPECT_TRUE(Contains(server.Errors(), "TLS certificate reloaded: /CN=server-two"))
      << server.Errors();
  // The connection made before goes on, with the certificate it began with.
  EXPECT_EQ(old.Request(bhttp::verb::get, "/readyz"), 200);
  // A broken pair (the key of another certificate) is refused; the one in use stays.
  std::filesystem::copy_file(certs_.Path("server-one.key"), certs_.Path("served.key"),
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline &&
         !Contains(server.Errors(), "TLS reload failed")) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(Contains(server.Errors(), "TLS reload failed, the certificate in use is kept"))
      << server.Errors();
  TlsClient after(certs_, server.port());
  ASSERT_TRUE(after.connected());
  EXPECT_TRUE(Contains(after.PeerSubject(), "CN=server-two")) << after.PeerSubject();
  EXPECT_EQ(after.Request(bhttp::verb::get, "/readyz"), 200);
  EXPECT_TRUE(server.Alive());
}

TEST_F(TlsServeTest, AMissingOrMismatchedPairStopsTheServerWithAReason) {
  CliResult alone = RunCli({"serve", "--memory-only", "--tls-cert", certs_.Path("server-one.pem")});
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_TRUE(Contains(alone.err, "--tls-cert and --tls-key go together")) << alone.err;
  CliResult mismatched =
      RunCli({"serve", "--memory-only", "--listen", "127.0.0.1:0", "--tls-cert",
              certs_.Path("server-one.pem"), "--tls-key", certs_.Path("server-two.key")});
  EXPECT_NE(mismatched.exit_code, 0);
  EXPECT_TRUE(Contains(mismatched.err, "does not match tls_cert")) << mismatched.err;
  EXPECT_FALSE(Contains(mismatched.out, "listening")) << mismatched.out;
}

// The command-line clients over https://: verified against --cacert (never the test's CA by
// default), the certificate must name the host, and a client certificate opens the admin and
// queue scopes of a server that asks for one; `anteroom backup` takes a whole backup so.
TEST_F(TlsServeTest, TheCliSpeaksHttpsVerifiesTheServerAndBacksItUp) {
  auto args = TlsArgs();
  args.insert(args.end(), {"--tls-client-ca", certs_.Path("ca.pem"), "--data",
                           (dir_.path() / "data").string()});
  ServerProcess server(args, {{"ANTEROOM_ADMIN_KEY", kAdminKey}});
  ASSERT_TRUE(server.started()) << server.error();
  EnvVars admin = {{"ANTEROOM_ADMIN_KEY", kAdminKey}};
  std::string by_ip = "https://127.0.0.1:" + std::to_string(server.port());
  std::string by_name = "https://localhost:" + std::to_string(server.port());
  std::vector<std::string> ca = {"--cacert", certs_.Path("ca.pem")};
  std::vector<std::string> cert = {"--client-cert", certs_.Path("client.pem"), "--client-key",
                                   certs_.Path("client.key")};
  auto cli = [&](std::vector<std::string> argv,
                 std::initializer_list<std::vector<std::string>> more) {
    for (const auto& m : more) argv.insert(argv.end(), m.begin(), m.end());
    return RunCli(argv, admin);
  };

  // With the CA and the client certificate: by address and by name.
  CliResult put = cli({"room", "create", "r", "--capacity", "1", "--server", by_ip}, {ca, cert});
  EXPECT_EQ(put.exit_code, 0) << put.out << put.err;
  CliResult push = cli({"push", "q", "{\"n\":1}", "--server", by_name}, {ca, cert});
  EXPECT_EQ(push.exit_code, 0) << push.out << push.err;
  // No client certificate: the server's 403 on an admin route.
  CliResult bare = cli({"room", "delete", "r", "--server", by_ip}, {ca});
  EXPECT_EQ(bare.exit_code, 1) << bare.out << bare.err;
  EXPECT_TRUE(Contains(bare.out, "client_certificate_required")) << bare.out;
  // Not trusted (the system's CAs do not know the test's): no request is sent.
  CliResult untrusted = cli({"room", "get", "r", "--server", by_ip}, {cert});
  EXPECT_EQ(untrusted.exit_code, 2) << untrusted.out << untrusted.err;
  EXPECT_TRUE(Contains(untrusted.err, "certificate verify failed")) << untrusted.err;
  // A missing CA file is said before anything is sent.
  CliResult missing =
      cli({"room", "get", "r", "--server", by_ip, "--cacert", certs_.Path("absent.pem")}, {cert});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(Contains(missing.err, "absent.pem")) << missing.err;

  // The backup, whole, over TLS.
  std::filesystem::path to = dir_.path() / "backup";
  CliResult backup = cli({"backup", "--server", by_ip, "--to", to.string()}, {ca, cert});
  ASSERT_EQ(backup.exit_code, 0) << backup.out << backup.err;
  EXPECT_TRUE(std::filesystem::exists(to / "backup.json"));
  CliResult checked = RunCli({"check-data", to.string()});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_TRUE(Contains(checked.out, "1 queues (1 jobs)")) << checked.out;
}

TEST_F(TlsServeTest, TheCliRefusesACertificateForAnotherName) {
  ServerProcess server(TlsArgs("server-elsewhere"), {{"ANTEROOM_ADMIN_KEY", kAdminKey}});
  ASSERT_TRUE(server.started()) << server.error();
  // Signed by the trusted CA, but for elsewhere.example: refused by address and by name.
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    CliResult r =
        RunCli({"room", "list", "--server", "https://" + host + ":" + std::to_string(server.port()),
                "--cacert", certs_.Path("ca.pem")},
               {{"ANTEROOM_ADMIN_KEY", kAdminKey}});
    EXPECT_EQ(r.exit_code, 2) << host << ": " << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, "certificate verify failed")) << r.err;
  }
}

}  // namespace
}  // namespace anteroom::testing
