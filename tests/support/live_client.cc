#include "support/live_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json/parse.hpp>

#include <deque>

namespace anteroom::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

std::string LiveMessage::type() const {
  if (!json.is_object()) return {};
  const auto* t = json.as_object().if_contains("type");
  return t && t->is_string() ? std::string(t->as_string()) : std::string();
}

std::string StatusOf(const LiveMessage& m) {
  const auto* s = m.json.as_object().if_contains("status");
  return s && s->is_string() ? std::string(s->as_string()) : std::string();
}

std::optional<int64_t> PositionOf(const LiveMessage& m) {
  const auto* p = m.json.as_object().if_contains("position");
  if (!p || !p->is_int64()) return std::nullopt;
  return p->as_int64();
}

struct LiveClient::Impl {
  net::io_context io;
  websocket::stream<beast::tcp_stream> ws{io};  // its lowest layer is the socket for SSE too
  beast::flat_buffer buffer;
  std::string raw;  // SSE: bytes read and not yet framed
  bool chunked = false;
  std::deque<LiveMessage> ready;
  bool reading = false;
  bool eof = false;
  Kind kind;

  // Runs the io_context until `done` or the deadline.
  template <typename Done>
  bool RunUntil(Done done, SteadyClock::time_point deadline) {
    while (!done()) {
      if (SteadyClock::now() >= deadline) return false;
      io.restart();
      io.run_one_until(deadline);
    }
    return true;
  }

  void Parse(std::string_view text) {
    boost::system::error_code ec;
    auto v = boost::json::parse(text, ec);
    if (!ec) ready.push_back({std::move(v), SteadyClock::now()});
  }

  // SSE: frames complete events out of `raw` (chunked or not).
  std::string events;
  void FrameEvents() {
    if (chunked) {
      while (true) {
        size_t eol = raw.find("\r\n");
        if (eol == std::string::npos) break;
        size_t size = std::stoul(raw.substr(0, eol), nullptr, 16);
        if (raw.size() < eol + 2 + size + 2) break;
        if (size == 0) {
          eof = true;
          raw.clear();
          break;
        }
        events += raw.substr(eol + 2, size);
        raw.erase(0, eol + 2 + size + 2);
      }
    } else {
      events += raw;
      raw.clear();
    }
    size_t end;
    while ((end = events.find("\n\n")) != std::string::npos) {
      std::string event = events.substr(0, end);
      events.erase(0, end + 2);
      size_t start = 0;
      while (start < event.size()) {
        size_t nl = event.find('\n', start);
        if (nl == std::string::npos) nl = event.size();
        std::string_view line(event.data() + start, nl - start);
        if (line.substr(0, 6) == "data: ") Parse(line.substr(6));
        start = nl + 1;
      }
    }
  }

  void StartRead() {
    if (reading || eof) return;
    reading = true;
    if (kind == Kind::kWebSocket) {
      ws.async_read(buffer, [this](beast::error_code ec, size_t) {
        reading = false;
        if (ec) {
          eof = true;
          return;
        }
        Parse(beast::buffers_to_string(buffer.data()));
        buffer.consume(buffer.size());
      });
    } else {
      auto chunk = std::make_shared<std::array<char, 4096>>();
      beast::get_lowest_layer(ws).socket().async_read_some(
          net::buffer(*chunk), [this, chunk](beast::error_code ec, size_t n) {
            reading = false;
            if (ec) {
              eof = true;
              return;
            }
            raw.append(chunk->data(), n);
            FrameEvents();
          });
    }
  }
};

LiveClient::LiveClient(uint16_t port, std::string target, Kind kind,
                       std::chrono::milliseconds timeout, std::vector<std::string> headers)
    : impl_(std::make_unique<Impl>()) {
  impl_->kind = kind;
  auto& stream = beast::get_lowest_layer(impl_->ws);
  beast::error_code ec;
  stream.socket().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) {
    error_ = "connect: " + ec.message();
    return;
  }
  auto deadline = SteadyClock::now() + timeout;
  if (kind == Kind::kWebSocket) {
    impl_->ws.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
      for (const std::string& line : headers) {
        size_t colon = line.find(':');
        std::string_view value = std::string_view(line).substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        req.insert(line.substr(0, colon), value);
      }
    }));
    websocket::response_type res;
    bool done = false;
    impl_->ws.async_handshake(res, "127.0.0.1", target, [&](beast::error_code hec) {
      done = true;
      ec = hec;
    });
    if (!impl_->RunUntil([&] { return done; }, deadline)) {
      error_ = "handshake timed out";
      return;
    }
    if (ec) {
      error_ = "handshake: " + ec.message();
      refused_status_ = res.result_int();
      refused_body_ = res.body();
    }
    subprotocol_ = std::string(res[beast::http::field::sec_websocket_protocol]);
    return;
  }
  std::string request =
      "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n";
  for (const std::string& line : headers) request += line + "\r\n";
  request += "\r\n";
  net::write(stream.socket(), net::buffer(request), ec);
  if (ec) {
    error_ = "write: " + ec.message();
    return;
  }
  // The header, then whatever body bytes came with it.
  net::streambuf head;
  bool done = false;
  size_t header_bytes = 0;
  net::async_read_until(stream.socket(), head, "\r\n\r\n", [&](beast::error_code rec, size_t n) {
    done = true;
    ec = rec;
    header_bytes = n;
  });
  if (!impl_->RunUntil([&] { return done; }, deadline) || ec) {
    error_ = "no response header";
    return;
  }
  std::string all(net::buffers_begin(head.data()), net::buffers_end(head.data()));
  std::string header = all.substr(0, header_bytes);
  impl_->raw = all.substr(header_bytes);
  int status = std::stoi(header.substr(9, 3));
  auto field = [&](std::string_view name) -> std::string {
    std::string lower = header;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t at = lower.find("\r\n" + std::string(name) + ":");
    if (at == std::string::npos) return {};
    size_t start = at + 2 + name.size() + 1;
    size_t end = header.find("\r\n", start);
    std::string v = header.substr(start, end - start);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    return v;
  };
  content_type_ = field("content-type");
  if (status != 200) {
    refused_status_ = status;
    // The error body: Content-Length bytes.
    size_t length = std::stoul(field("content-length").empty() ? "0" : field("content-length"));
    while (impl_->raw.size() < length) {
      std::array<char, 4096> chunk;
      size_t n = stream.socket().read_some(net::buffer(chunk), ec);
      if (ec) break;
      impl_->raw.append(chunk.data(), n);
    }
    refused_body_ = impl_->raw;
    error_ = "refused with " + std::to_string(status);
    return;
  }
  impl_->chunked = field("transfer-encoding") == "chunked";
  impl_->FrameEvents();
}

LiveClient::~LiveClient() { Close(); }

std::optional<LiveMessage> LiveClient::Next(std::chrono::milliseconds timeout) {
  if (!ok()) return std::nullopt;
  auto deadline = SteadyClock::now() + timeout;
  while (impl_->ready.empty()) {
    if (impl_->eof) {
      closed_ = true;
      return std::nullopt;
    }
    impl_->StartRead();
    if (!impl_->RunUntil([&] { return !impl_->reading; }, deadline)) return std::nullopt;
  }
  LiveMessage m = std::move(impl_->ready.front());
  impl_->ready.pop_front();
  return m;
}

std::optional<LiveMessage> LiveClient::NextOf(std::string_view type,
                                              std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return std::nullopt;
    auto m = Next(left);
    if (!m || m->type() == type) return m;
  }
}

uint16_t LiveClient::local_port() const {
  boost::system::error_code ec;
  auto endpoint = beast::get_lowest_layer(impl_->ws).socket().local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void LiveClient::Close() {
  if (!impl_) return;
  beast::error_code ec;
  auto& socket = beast::get_lowest_layer(impl_->ws).socket();
  if (impl_->kind == Kind::kWebSocket && impl_->ws.is_open()) {
    // Shared: when the peer never answers (its network gone), the handler runs after this
    // scope, once the socket is closed below.
    auto done = std::make_shared<bool>(false);
    impl_->ws.async_close(websocket::close_code::going_away,
                          [done](beast::error_code) { *done = true; });
    impl_->RunUntil([&] { return *done; }, SteadyClock::now() + std::chrono::seconds(2));
  }
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
  impl_->io.restart();
  impl_->io.poll();  // completes the aborted operations, so nothing refers to impl_ later
}

}  // namespace anteroom::testing
