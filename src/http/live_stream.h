#pragma once
// A connection that carries pushed messages to one client: a WebSocket or a Server-Sent Events
// stream. It lives on its socket's thread; the hub hands it messages from another thread.
//
// Coalescing: at most one status message waits behind the one being written; a newer one
// replaces it, so a slow client gets the latest state, never a backlog. A heartbeat goes out
// every heartbeat interval. A write stuck longer than kWriteTimeout closes the stream.
//
// A client that vanished without a word (its network gone: no FIN, no RST) must not keep its
// stream open until TCP gives up, some 15 minutes later. BoundSilence ties the stream to a bound
// its owner sets (the live hub: the room's check-in timeout): heartbeats go out at a third of it,
// and the kernel drops the connection when what was sent stays unacknowledged for half of it
// (TCP_USER_TIMEOUT), so a vanished client's stream ends within the bound, on either transport.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "http/drain_list.h"
#include "http/socket.h"

namespace anteroom::http {

struct LiveStreamOptions {
  std::chrono::milliseconds heartbeat{15'000};  // at most; BoundSilence may shorten it
};

// The shortest bound BoundSilence applies: below it a slow but live link would lose its stream.
inline constexpr std::chrono::milliseconds kMinSilenceBound{1'500};

class LiveStream : public Drainable, public std::enable_shared_from_this<LiveStream> {
 public:
  using Executor = boost::asio::io_context::executor_type;
  // Rewrites a message before it is queued: what this stream must not show of a message that
  // its sender writes once for several streams (a field blanked).
  using MessageFilter = void (*)(std::string& message);
  virtual ~LiveStream() = default;

  // Call on executor() only. Replaces a status message not yet written.
  void Deliver(std::string message);
  // What Deliver is handed passes through `filter` before it is queued (heartbeats do not).
  // Call before the first Deliver.
  void FilterMessages(MessageFilter filter) { filter_ = filter; }
  // Ordered delivery (the admin event stream): every frame is written, in order, none replaced;
  // the sender bounds what it queues (one read's worth) and sends more on OnDrained. Call on
  // executor() only. With SendFramesAsIs each message is a whole SSE frame (id:, event:, data:
  // lines and the blank line), heartbeats too; call it before the first message.
  void Enqueue(std::string frame);
  size_t queued() const { return queue_.size() + (writing_ && !in_flight_.empty() ? 1 : 0); }
  void OnDrained(std::function<void()> fn) { on_drained_ = std::move(fn); }
  void SendFramesAsIs() { frames_as_is_ = true; }
  // Call on executor() only: closes once what is queued was written.
  void Finish();
  // The server is stopping: what is queued is written, then the client is told to reconnect
  // (elsewhere: another process, or this one restarted), a WebSocket with close code 1012
  // (service restart); an event stream ends, and EventSource reconnects after its `retry`.
  void BeginDrain() override;
  // Runs once, on executor(), when the connection has ended (either side). Set before the
  // stream is started.
  void OnClosed(std::function<void()> fn) { on_closed_ = std::move(fn); }
  virtual Executor executor() = 0;
  // Bytes this stream holds beyond its object (buffers), for the memory report.
  virtual size_t BufferBytes() const = 0;
  // Something to keep alive exactly as long as the stream (its place in the connection count).
  void Hold(std::shared_ptr<void> token) { held_ = std::move(token); }
  // Runs once, on executor(), when the first message has been written. Set before the first
  // Deliver.
  void OnFirstWritten(std::function<void()> fn) { on_first_written_ = std::move(fn); }
  // Call on executor() only: a client that vanished is noticed within `bound` (at least
  // kMinSilenceBound), see the top of this file.
  void BoundSilence(std::chrono::milliseconds bound);

  // A WebSocket: accepts the upgrade `request` (whose bytes after it are in `buffer`), then calls
  // `ready` with the stream; nothing if the handshake fails.
  static void AcceptWebSocket(Socket socket, boost::beast::flat_buffer buffer,
                              boost::beast::http::request<boost::beast::http::string_body> request,
                              LiveStreamOptions options,
                              std::function<void(std::shared_ptr<LiveStream>)> ready);
  static void AcceptWebSocket(TlsSocket socket, boost::beast::flat_buffer buffer,
                              boost::beast::http::request<boost::beast::http::string_body> request,
                              LiveStreamOptions options,
                              std::function<void(std::shared_ptr<LiveStream>)> ready);
  // Server-Sent Events: writes the response header (with `headers`, whole "Name: value\r\n"
  // lines, e.g. CORS), then calls `ready` with the stream.
  static void StartEventStream(Socket socket, unsigned http_version, LiveStreamOptions options,
                               std::string headers,
                               std::function<void(std::shared_ptr<LiveStream>)> ready);
  static void StartEventStream(TlsSocket socket, unsigned http_version, LiveStreamOptions options,
                               std::string headers,
                               std::function<void(std::shared_ptr<LiveStream>)> ready);

 protected:
  LiveStream(LiveStreamOptions options, const Executor& executor)
      : options_(options), heartbeat_(options.heartbeat), timer_(executor) {}
  // Writes one framed message; calls Written() when done (on executor()).
  virtual void WriteMessage(const std::string& message) = 0;
  // Graceful: a close frame or the last chunk first. Otherwise the socket just closes (the peer
  // is gone or stuck).
  virtual void CloseTransport(bool graceful) = 0;
  virtual Socket& TcpSocket() = 0;
  // The transport's completions.
  void Written(bool ok);
  void Ended();
  void StartHeartbeats();
  void StopHeartbeats() { timer_.cancel(); }
  bool frames_as_is() const { return frames_as_is_; }
  bool drained() const { return drained_; }
  std::chrono::milliseconds heartbeat_interval() const { return heartbeat_; }

  LiveStreamOptions options_;

 private:
  void Pump();

  std::optional<std::string> pending_;  // the newest status not yet written
  std::deque<std::string> queue_;       // ordered frames not yet written (Enqueue)
  std::function<void()> on_drained_;
  bool frames_as_is_ = false;
  std::chrono::milliseconds heartbeat_;
  boost::asio::steady_timer timer_;
  bool heartbeats_started_ = false;
  bool heartbeat_due_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool ended_ = false;
  bool drained_ = false;  // BeginDrain: the close tells the client to reconnect
  std::string in_flight_;
  std::chrono::steady_clock::time_point write_started_;
  std::function<void()> on_closed_;
  std::function<void()> on_first_written_;
  std::shared_ptr<void> held_;
  MessageFilter filter_ = nullptr;
};

}  // namespace anteroom::http
