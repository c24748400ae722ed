#pragma once
// The options of the live channel's WebSocket streams, in one place for the server
// (live_stream.cc) and the fuzzer (fuzz/websocket_frames.cc), which runs them over an
// in-memory stream.

#include <boost/beast/http/field.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <chrono>
#include <cstddef>

namespace anteroom::server {

inline constexpr size_t kMaxClientMessage = 4096;  // clients have nothing big to say

template <typename NextLayer>
void ApplyWebSocketOptions(boost::beast::websocket::stream<NextLayer>& ws) {
  namespace websocket = boost::beast::websocket;
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = std::chrono::seconds(10);
  // A peer that answers nothing, not even the pings sent at half this, is gone.
  timeouts.idle_timeout = std::chrono::seconds(60);
  timeouts.keep_alive_pings = true;
  ws.set_option(timeouts);
  ws.read_message_max(kMaxClientMessage);
  ws.text(true);
  ws.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
    res.set(boost::beast::http::field::server, "anteroom");
  }));
}

}  // namespace anteroom::server
