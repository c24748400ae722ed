// Raw bytes as they arrive on a connection, read as src/http/http_server.cc reads them: the
// head found and checked raw (CheckRawHead), parsed with the server's parser set-up
// (ConfigureRequestParser), checked parsed against the route's body limit (CheckParsedHead),
// the body read through a buffer of kReadBufferLimit, the trailer refused (CheckTrailer); each
// request that passes is dispatched to every route over a memory backend. Pipelined requests
// are handled in order until one ends the connection.
//
// The answers are checked by World: each request answered exactly once, with a known status,
// JSON answers valid JSON, no header that breaks the framing.

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "harness.h"
#include "http/request_head.h"

namespace {

namespace http = boost::beast::http;
using anteroom::fuzz::World;
using anteroom::http::RequestParser;

constexpr int kMaxRequests = 64;  // per connection, so one input stays quick

// Reads the body from `rest` as the server's read loop does: the parser sees at most what the
// read buffer holds (kReadBufferLimit); the input ending is the client closing its side.
// False when the server would answer an error and close.
bool ReadBody(RequestParser& parser, std::string_view& rest) {
  using anteroom::http::kReadBufferLimit;
  parser.eager(true);
  while (!parser.is_done()) {
    if (rest.empty()) return false;  // the client went away mid-body
    std::string_view window = rest.substr(0, kReadBufferLimit);
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(window.data(), window.size()), ec);
    rest.remove_prefix(used);
    if (ec == http::error::need_more) {
      // A full buffer that the parser cannot use: buffer_overflow (the trailer is too large).
      // Otherwise the server waits for bytes that will not come.
      if (used == 0) return false;
      continue;
    }
    if (ec) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anteroom::http;
  World world;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int n = 0; n < kMaxRequests && !rest.empty(); ++n) {
    size_t end = HeadEnd(rest);
    if (end == std::string_view::npos) break;  // 431 at the header limit, or the client left
    std::string_view head = rest.substr(0, end);
    if (CheckRawHead(head)) break;  // 400 and close
    RequestParser parser;
    ConfigureRequestParser(parser);
    boost::beast::error_code ec;
    size_t used = parser.put(boost::asio::buffer(head.data(), head.size()), ec);
    rest.remove_prefix(used);
    if (ec || !parser.is_header_done()) break;
    size_t limit = world.router().BodyLimitFor(parser.get().target());
    parser.body_limit(limit);
    if (CheckParsedHead(parser, limit)) break;
    size_t fields_in_head = FieldCount(parser);
    if (!ReadBody(parser, rest)) break;
    if (parser.chunked() && CheckTrailer(parser, fields_in_head)) break;

    auto message = parser.release();
    Request request;
    request.method = message.method();
    request.target = std::string(message.target());
    request.body = std::move(message.body());
    request.authorization = std::string(message[http::field::authorization]);
    request.forwarded_for = std::string(message["X-Forwarded-For"]);
    request.origin = std::string(message[http::field::origin]);
    request.host = std::string(message[http::field::host]);
    request.forwarded_host = std::string(message["X-Forwarded-Host"]);
    request.content_type = std::string(message[http::field::content_type]);
    request.peer = boost::asio::ip::make_address_v4("127.0.0.1");
    bool last = !message.keep_alive();
    if (message.method() == http::verb::get && world.router().MayStream(request.target)) {
      last = true;  // nothing is read after a request that may become a stream
      request.websocket = boost::beast::websocket::is_upgrade(message);
    }
    request.fields = std::move(static_cast<http::fields&>(message));
    world.Dispatch(request);
    if (last) break;
  }
  // The connection ends here; half the time the client hangs up on what still waits.
  if (size % 2 == 1) world.HangUp();
  world.Settle();
  return 0;
}
