// Raw bytes as they arrive on a connection: parsed as the server parses them (header limit,
// then the route's body limit, the Transfer-Encoding and Content-Length checks), and each
// request that parses dispatched to every route over a memory backend. Pipelined requests are
// handled in order until one ends the connection, as in src/server/http_server.cc.
//
// The answers are checked by World: each request answered exactly once, with a known status,
// JSON answers valid JSON, no header that breaks the framing.

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "harness.h"

namespace {

namespace http = boost::beast::http;
using anteroom::fuzz::World;

// As src/server/http_server.cc sets up its parser (kHeaderLimit, kHardBodyLimit).
constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kHardBodyLimit = 64 * 1024 * 1024;
constexpr int kMaxRequests = 64;  // per connection, so one input stays quick

// Feeds `rest` to the parser until it has the header (or the whole message), or fails. The
// input ending is the peer closing its side.
void Feed(http::request_parser<http::string_body>& parser, std::string_view& rest, bool header,
          boost::beast::error_code& ec) {
  while (!(header ? parser.is_header_done() : parser.is_done())) {
    if (rest.empty()) {
      parser.put_eof(ec);
      if (!ec && !(header ? parser.is_header_done() : parser.is_done())) {
        ec = http::error::partial_message;
      }
      return;
    }
    size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
    rest.remove_prefix(used);
    if (ec == http::error::need_more) {
      ec = {};
      if (used == 0) {  // the rest is an incomplete element: nothing more will come
        rest = {};
      }
      continue;
    }
    if (ec) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World world;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int n = 0; n < kMaxRequests && !rest.empty(); ++n) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kHardBodyLimit);
    boost::beast::error_code ec;
    Feed(parser, rest, /*header=*/true, ec);
    if (ec) break;  // the server answers 400/413 and closes
    const auto& header = parser.get();
    size_t limit = world.router().BodyLimitFor(header.target());
    parser.body_limit(limit);
    if (header.count(http::field::transfer_encoding) != 0 && !parser.chunked()) break;
    if (auto length = parser.content_length(); length && *length > limit) break;
    parser.eager(true);
    Feed(parser, rest, /*header=*/false, ec);
    if (ec) break;

    auto message = parser.release();
    anteroom::server::Request request;
    request.method = message.method();
    request.target = std::string(message.target());
    request.body = std::move(message.body());
    request.authorization = std::string(message[http::field::authorization]);
    bool last = !message.keep_alive();
    if (message.method() == http::verb::get && world.router().MayStream(request.target)) {
      last = true;  // nothing is read after a request that may become a stream
      request.websocket = boost::beast::websocket::is_upgrade(message);
    }
    world.Dispatch(request);
    if (last) break;
  }
  world.Settle();
  return 0;
}
