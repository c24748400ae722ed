// The live channel's WebSocket after the upgrade: a Beast websocket::stream with the server's
// options (http/websocket_options.h) over an in-memory stream, reading whatever frames the
// client sends (pings, closes, fragments, masks, oversize messages), as the live stream does,
// while a status message is written to it. The client then hangs up.
//
// Input: byte 0 sets how many bytes each read gets; then, if the rest starts with "GET ", an
// upgrade request (up to its blank line) parsed with the server's limits and accepted if it
// is one; otherwise a valid upgrade is used. What follows is the client's frames.

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "harness.h"
#include "http/request_head.h"
#include "http/websocket_options.h"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using anteroom::fuzz::Fail;

constexpr std::string_view kUpgrade =
    "GET /v1/rooms/r/ws?session=ann HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n\r\n";
constexpr std::string_view kStatus =
    R"({"type":"status","room":"r","session":"ann","status":"waiting","position":3,)"
    R"("waiting":9,"active":2,"capacity":2,"eta_ms":12000,"token":null})";

// The upgrade request at the start of `in`, consumed from it; false if it does not parse.
bool ParseUpgrade(std::string_view& in, http::request<http::string_body>& out) {
  anteroom::http::RequestParser parser;
  anteroom::http::ConfigureRequestParser(parser);  // as the connection reads the upgrade
  beast::error_code ec;
  size_t used = parser.put(net::buffer(in.data(), in.size()), ec);
  if (ec || !parser.is_header_done()) return false;
  in.remove_prefix(used);
  if (!parser.is_done()) return false;  // a body on an upgrade: the server reads none
  out = parser.release();
  return websocket::is_upgrade(out);
}

struct Session : std::enable_shared_from_this<Session> {
  explicit Session(beast::test::stream socket) : ws(std::move(socket)) {
    anteroom::http::ApplyWebSocketOptions(ws);
  }
  void Read() {
    buffer.clear();
    ws.async_read(buffer, [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->End();
      if (n > anteroom::http::kMaxClientMessage) Fail("a message over read_message_max");
      ++self->messages;
      self->Read();
    });
  }
  void Write(int left) {
    if (left == 0 || ended) return;
    ws.async_write(net::buffer(kStatus.data(), kStatus.size()),
                   [self = shared_from_this(), left](beast::error_code ec, size_t) {
                     if (ec) return self->End();
                     self->Write(left - 1);
                   });
  }
  void End() {
    if (ended) return;
    ended = true;
    beast::get_lowest_layer(ws).close();  // as CloseTransport(false) closes the socket
  }
  websocket::stream<beast::test::stream> ws;
  beast::flat_buffer buffer;
  size_t messages = 0;
  bool ended = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t read_size = 1 + data[0] % 128;
  if (data[0] >= 128) read_size = SIZE_MAX;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);

  http::request<http::string_body> request;
  if (in.substr(0, 4) == "GET ") {
    if (!ParseUpgrade(in, request)) return 0;  // answered by HTTP, not a WebSocket
  } else {
    std::string_view fixed = kUpgrade;
    if (!ParseUpgrade(fixed, request)) Fail("the fixed upgrade does not parse");
  }

  net::io_context ioc;
  beast::test::stream server(ioc), client(ioc);
  server.connect(client);
  server.read_size(read_size);
  server.append(in);      // the frames, already waiting
  server.close_remote();  // then the client hangs up: reads end in eof

  auto session = std::make_shared<Session>(std::move(server));
  auto req = std::make_shared<http::request<http::string_body>>(std::move(request));
  session->ws.async_accept(*req, [session, req](beast::error_code ec) {
    if (ec) return session->End();
    session->Write(2);
    session->Read();
  });
  // Only the pending operations hold the stream, as in the server: once they are done it goes,
  // and with it its timers.
  std::weak_ptr<Session> alive = session;
  session.reset();
  ioc.run();
  if (!alive.expired()) Fail("the stream outlived its operations");
  return 0;
}
