#pragma once
// The options of the live channel's WebSocket streams, in one place for the server
// (live_stream.cc) and the fuzzer (fuzz/websocket_frames.cc), which runs them over an
// in-memory stream.

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

namespace anteroom::http {

inline constexpr size_t kMaxClientMessage = 4096;  // clients have nothing big to say

// The subprotocol the live channel answers when a client offers it. A client may offer others
// beside it that are never answered: a browser's WebSocket cannot send headers, so an offer is
// where it can put a credential.
inline constexpr std::string_view kLiveSubprotocol = "anteroom";

// The subprotocols a handshake offers, in order (Sec-WebSocket-Protocol: a comma-separated list,
// possibly over several header lines).
inline std::vector<std::string_view> OfferedSubprotocols(const boost::beast::http::fields& fields) {
  std::vector<std::string_view> offered;
  auto [begin, end] = fields.equal_range(boost::beast::http::field::sec_websocket_protocol);
  for (auto it = begin; it != end; ++it) {
    std::string_view list = it->value();
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string_view item = list.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (!item.empty()) offered.push_back(item);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
  }
  return offered;
}

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

}  // namespace anteroom::http
