#pragma once
// Test support: a live-channel client (WebSocket or Server-Sent Events) that reads the server's
// JSON messages one at a time, with bounded waits. Each message carries the time it arrived.

#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace anteroom::testing {

struct LiveMessage {
  boost::json::value json;
  std::chrono::steady_clock::time_point at;
  std::string type() const;  // "status", "heartbeat", ...
};

class LiveClient {
 public:
  enum class Kind { kWebSocket, kEvents };
  // Connects to 127.0.0.1:port and opens `target` (e.g. /v1/rooms/r/ws?session=a), sending
  // `headers` ("Name: value") with the request. Check ok().
  LiveClient(uint16_t port, std::string target, Kind kind,
             std::chrono::milliseconds timeout = std::chrono::seconds(5),
             std::vector<std::string> headers = {});
  ~LiveClient();
  LiveClient(const LiveClient&) = delete;
  LiveClient& operator=(const LiveClient&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // The HTTP status of a refused upgrade (and its body), 0 when the stream opened.
  int refused_status() const { return refused_status_; }
  const std::string& refused_body() const { return refused_body_; }
  // SSE: the response's Content-Type.
  const std::string& content_type() const { return content_type_; }
  // WebSocket: the subprotocol the server answered ("" for none).
  const std::string& subprotocol() const { return subprotocol_; }

  // The next message, or nullopt when none arrives in time or the server closed the stream.
  std::optional<LiveMessage> Next(std::chrono::milliseconds timeout);
  // The next message of a type, skipping others (heartbeats).
  std::optional<LiveMessage> NextOf(std::string_view type, std::chrono::milliseconds timeout);
  // Waits for a status message for which `pred` is true.
  template <typename Pred>
  std::optional<LiveMessage> NextStatus(Pred pred, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto m = NextOf("status", left);
      if (!m) return std::nullopt;
      if (pred(m->json)) return m;
    }
  }
  // True once the server ended the stream (seen by a read).
  bool closed_by_server() const { return closed_; }
  // Closes our side now (a WebSocket close, or the TCP connection for SSE).
  void Close();
  // The connection's local port (0 when it is not open): what a test drops to make the client
  // vanish.
  uint16_t local_port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
  int refused_status_ = 0;
  std::string refused_body_;
  std::string content_type_;
  std::string subprotocol_;
  bool closed_ = false;
};

// Status fields as the tests need them.
std::string StatusOf(const LiveMessage& m);
std::optional<int64_t> PositionOf(const LiveMessage& m);

}  // namespace anteroom::testing
