#pragma once
// A small synchronous client of anteroom's HTTP API, so a C++ program never writes HTTP by
// hand. One keep-alive connection per Client (reconnected when the server closed it); not
// thread-safe (but for Interrupt): use one Client per thread. A queue worker built on it is
// anteroom/worker.hpp.

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom {

struct HttpResult {
  int status = 0;  // HTTP status; 0 when the request did not get an answer
  std::string body;
  boost::json::value json;   // the parsed body (null if it was not JSON)
  std::string error;         // transport error, empty when an answer arrived
  bool interrupted = false;  // cut short by Interrupt()

  bool ok() const { return error.empty() && status >= 200 && status < 300; }
};

// For an https:// server: whom to trust, and the certificate to show a server that asks for one
// (anteroom serve --tls-client-ca). The server's certificate is verified against ca_file (empty:
// the system's trusted CAs) and must name the URL's host; TLS 1.2 or 1.3 only.
struct ClientTls {
  std::string ca_file;
  std::string cert_file;  // PEM chain; with key_file
  std::string key_file;
};

class Client {
 public:
  // server_url: http://HOST:PORT or https://HOST:PORT. admin_key, when set, is sent as a Bearer
  // token. A TLS setting that cannot be loaded (a missing file) makes every request answer
  // the reason as its error.
  explicit Client(std::string server_url = "http://127.0.0.1:8080", std::string admin_key = {},
                  ClientTls tls = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Any request; path is sent as given (already encoded).
  HttpResult Request(std::string_view method, std::string_view path, std::string_view body = {});

  HttpResult PutRoom(std::string_view room, const boost::json::object& config);
  HttpResult GetRoom(std::string_view room);
  HttpResult ListRooms();
  HttpResult DeleteRoom(std::string_view room);
  HttpResult Check(std::string_view room, std::optional<std::string_view> session = {});
  HttpResult Touch(std::string_view room, std::string_view session);
  HttpResult Leave(std::string_view room, std::string_view session, bool final = false);
  HttpResult EndSession(std::string_view room, std::string_view session);
  HttpResult VerifyToken(std::string_view token);
  HttpResult Health();

  // Queues. `options` may hold delay_ms, priority, dedupe_key, max_attempts.
  HttpResult Push(std::string_view queue, const boost::json::value& payload,
                  const boost::json::object& options = {});
  // `jobs`: objects as Push takes them, each with its "payload".
  HttpResult PushBatch(std::string_view queue, const boost::json::array& jobs);
  // `ack`: leases of finished jobs, acked before the fetch (answer field "acked").
  HttpResult Fetch(std::string_view queue, std::string_view worker, int max = 1,
                   int64_t lease_ms = 30'000, int64_t wait_ms = 0,
                   const std::vector<std::string>& ack = {});
  HttpResult Ack(std::string_view queue, const std::vector<std::string>& leases);
  HttpResult Nack(std::string_view queue, const std::vector<std::string>& leases,
                  std::optional<int64_t> delay_ms = {}, std::string_view error = {});
  HttpResult Extend(std::string_view queue, const std::vector<std::string>& leases,
                    int64_t lease_ms);
  HttpResult QueueStats(std::string_view queue);
  HttpResult ListQueues();

  // The one thread-safe call: cuts short the request this Client is making or, when it is
  // between requests, its next one (not sent at all), so a cut cannot fall between two steps of
  // the caller. A request in flight is cut by half-closing its connection: the server drops a
  // parked long poll, so the request answers what the server sent by then (a 503, or the jobs it
  // had already handed over), is not retried, and its connection is not reused. Answers whether
  // a request was in flight.
  bool Interrupt();

  // Percent-encodes one path segment.
  static std::string Segment(std::string_view text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anteroom
