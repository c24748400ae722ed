#include "anteroom/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/pchars.hpp>

#include <mutex>
#include <optional>

namespace anteroom {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

struct Client::Impl {
  std::string host;
  std::string port;
  std::string admin_key;
  net::io_context ioc;
  beast::tcp_stream stream{ioc};  // plain http://
  // https://: the context made once, a stream per connection (a TLS stream is not reused).
  std::optional<net::ssl::context> tls;
  std::string tls_error;  // why the TLS settings could not be loaded; every request answers it
  std::unique_ptr<TlsStream> tls_stream;
  beast::flat_buffer buffer;
  bool connected = false;
  // Interrupt() from another thread: which request is in flight, and whether it was cut.
  std::mutex mu;
  uint64_t request_seq = 0;
  bool in_request = false;
  bool cut = false;          // the request in flight was cut
  bool cut_pending = false;  // Interrupt() between requests: cut the next one

  // The TCP layer of the connection in use.
  beast::tcp_stream& Tcp() { return tls_stream ? beast::get_lowest_layer(*tls_stream) : stream; }

  void SetUpTls(const ClientTls& settings) {
    tls.emplace(net::ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_2_VERSION);
    beast::error_code ec;
    tls->set_verify_mode(net::ssl::verify_peer, ec);
    if (settings.ca_file.empty()) {
      tls->set_default_verify_paths(ec);
    } else {
      tls->load_verify_file(settings.ca_file, ec);
      if (ec) tls_error = "tls: the CA file " + settings.ca_file + ": " + ec.message();
    }
    if (!settings.cert_file.empty() || !settings.key_file.empty()) {
      if (settings.cert_file.empty() || settings.key_file.empty()) {
        tls_error = "tls: a client certificate needs both its certificate and its key file";
        return;
      }
      tls->use_certificate_chain_file(settings.cert_file, ec);
      if (ec) tls_error = "tls: the certificate " + settings.cert_file + ": " + ec.message();
      tls->use_private_key_file(settings.key_file, net::ssl::context::pem, ec);
      if (ec && tls_error.empty()) {
        tls_error = "tls: the key " + settings.key_file + ": " + ec.message();
      }
    }
  }

  beast::error_code Connect() {
    beast::error_code ec;
    tcp::resolver resolver(ioc);
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) return ec;
    if (tls) tls_stream = std::make_unique<TlsStream>(ioc, *tls);
    Tcp().connect(endpoints, ec);
    if (ec) return ec;
    Tcp().socket().set_option(tcp::no_delay(true), ec);
    if (tls_stream) {
      // SNI for a name (never for an address, RFC 6066), and the certificate must name the host.
      boost::system::error_code not_ip;
      net::ip::make_address(host, not_ip);
      if (not_ip) SSL_set_tlsext_host_name(tls_stream->native_handle(), host.c_str());
      tls_stream->set_verify_callback(net::ssl::host_name_verification(host));
      tls_stream->handshake(net::ssl::stream_base::client, ec);
      if (ec) {
        Disconnect();
        return ec;
      }
    }
    buffer.clear();
    connected = true;
    return {};
  }

  void Disconnect() {
    beast::error_code ignored;
    Tcp().socket().close(ignored);
    connected = false;
  }

  HttpResult Once(http::verb verb, std::string_view path, std::string_view body, bool& retry) {
    HttpResult result;
    bool cut_before = false;
    {
      std::lock_guard lock(mu);
      ++request_seq;
      cut_before = cut_pending;
      cut_pending = false;
      cut = false;
      in_request = !cut_before;
    }
    if (cut_before) {  // Interrupt() came between requests: this one is not sent
      result.interrupted = true;
      result.error = "interrupted";
      retry = false;
      return result;
    }
    if (!tls_error.empty()) {
      std::lock_guard lock(mu);
      in_request = false;
      result.error = tls_error;
      return result;
    }
    bool fresh = !connected;
    if (!connected) {
      if (auto ec = Connect()) {
        std::lock_guard lock(mu);
        in_request = false;
        result.error = "connect: " + ec.message();
        return result;
      }
    }
    http::request<http::string_body> req{verb, path, 11};
    req.set(http::field::host, host);
    req.set(http::field::user_agent, "anteroom-client");
    if (!admin_key.empty()) req.set(http::field::authorization, "Bearer " + admin_key);
    if (!body.empty() || verb == http::verb::post || verb == http::verb::put) {
      req.set(http::field::content_type, "application/json");
      req.body() = std::string(body);
    }
    req.keep_alive(true);
    req.prepare_payload();
    // Written and read at once: a server may answer before the whole body is sent (413, or a
    // 503 under load) and stop reading; the answer is what matters, not the unsent rest.
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    beast::error_code write_ec;
    beast::error_code ec;
    bool written = false;
    auto exchange = [&](auto& s) {
      http::async_write(s, req, [&](beast::error_code e, size_t) {
        write_ec = e;
        written = true;
      });
      http::async_read(s, buffer, parser, [&](beast::error_code e, size_t) {
        ec = e;
        if (!written) {
          beast::error_code ignored;
          Tcp().socket().cancel(ignored);  // the rest of the request is not wanted
        }
      });
    };
    if (tls_stream) {
      exchange(*tls_stream);
    } else {
      exchange(stream);
    }
    ioc.restart();
    ioc.run();
    {
      std::lock_guard lock(mu);
      in_request = false;
      result.interrupted = cut;
    }
    if (result.interrupted) retry = false;
    if (!ec && write_ec && !result.interrupted) {
      Disconnect();  // answered, but the request was cut short: the connection is spent
    }
    if (ec) {
      Disconnect();
      // A keep-alive connection the server closed while idle: try once on a new one.
      retry = !fresh && !result.interrupted;
      result.error =
          (write_ec && write_ec != net::error::operation_aborted ? write_ec : ec).message();
      return result;
    }
    auto res = parser.release();
    result.status = static_cast<int>(res.result_int());
    result.body = std::move(res.body());
    boost::system::error_code jec;
    result.json = boost::json::parse(result.body, jec);
    if (jec) result.json = nullptr;
    if ((!res.keep_alive() || result.interrupted) && connected) Disconnect();
    return result;
  }

  bool Interrupt() {
    std::lock_guard lock(mu);
    if (!in_request) {
      cut_pending = true;
      return false;
    }
    if (cut) return true;
    // Run by Once's own ioc.run(): the socket is only touched on its thread. A request that
    // ends before the handler runs leaves it to the next run(), where the sequence tells.
    net::post(ioc, [this, seq = request_seq] {
      std::lock_guard lock(mu);
      if (!in_request || seq != request_seq) return;
      cut = true;
      beast::error_code ignored;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
    return true;
  }
};

Client::Client(std::string server_url, std::string admin_key, ClientTls tls)
    : impl_(std::make_unique<Impl>()) {
  auto url = boost::urls::parse_uri(server_url);
  if (url) {
    bool https = url->scheme() == "https";
    impl_->host = std::string(url->host_address());  // an IPv6 literal without its brackets
    impl_->port = url->has_port() ? std::string(url->port()) : (https ? "443" : "80");
    if (https) impl_->SetUpTls(tls);
  } else {
    impl_->host = "127.0.0.1";
    impl_->port = "8080";
  }
  impl_->admin_key = std::move(admin_key);
}

Client::~Client() = default;

std::string Client::Segment(std::string_view text) {
  return boost::urls::encode(text, boost::urls::unreserved_chars);
}

bool Client::Interrupt() { return impl_->Interrupt(); }

HttpResult Client::Request(std::string_view method, std::string_view path, std::string_view body) {
  http::verb verb = http::string_to_verb(method);
  bool retry = false;
  HttpResult r = impl_->Once(verb, path, body, retry);
  if (retry) r = impl_->Once(verb, path, body, retry);
  return r;
}

namespace {
std::string RoomPath(std::string_view room, std::string_view tail = {}) {
  return "/v1/rooms/" + Client::Segment(room) + std::string(tail);
}
std::string SessionBody(std::string_view session) {
  return boost::json::serialize(boost::json::object{{"session", session}});
}
}  // namespace

HttpResult Client::PutRoom(std::string_view room, const boost::json::object& config) {
  return Request("PUT", RoomPath(room), boost::json::serialize(config));
}
HttpResult Client::GetRoom(std::string_view room) { return Request("GET", RoomPath(room)); }
HttpResult Client::ListRooms() { return Request("GET", "/v1/rooms"); }
HttpResult Client::DeleteRoom(std::string_view room) { return Request("DELETE", RoomPath(room)); }

HttpResult Client::Check(std::string_view room, std::optional<std::string_view> session) {
  return Request("POST", RoomPath(room, "/check"), session ? SessionBody(*session) : "{}");
}
HttpResult Client::Touch(std::string_view room, std::string_view session) {
  return Request("POST", RoomPath(room, "/touch"), SessionBody(session));
}
HttpResult Client::Leave(std::string_view room, std::string_view session, bool final) {
  return Request(
      "POST", RoomPath(room, "/leave"),
      boost::json::serialize(boost::json::object{{"session", session}, {"final", final}}));
}
HttpResult Client::EndSession(std::string_view room, std::string_view session) {
  return Request("DELETE", RoomPath(room, "/sessions/" + Segment(session)));
}
HttpResult Client::VerifyToken(std::string_view token) {
  return Request("POST", "/v1/tokens/verify",
                 boost::json::serialize(boost::json::object{{"token", token}}));
}
HttpResult Client::Health() { return Request("GET", "/healthz"); }

namespace {
std::string QueuePath(std::string_view queue, std::string_view tail = {}) {
  return "/v1/queues/" + Client::Segment(queue) + std::string(tail);
}
boost::json::array LeaseArray(const std::vector<std::string>& leases) {
  boost::json::array a;
  for (const auto& l : leases) a.emplace_back(l);
  return a;
}
}  // namespace

HttpResult Client::Push(std::string_view queue, const boost::json::value& payload,
                        const boost::json::object& options) {
  boost::json::object job = options;
  job["payload"] = payload;
  return Request("POST", QueuePath(queue, "/jobs"), boost::json::serialize(job));
}
HttpResult Client::PushBatch(std::string_view queue, const boost::json::array& jobs) {
  return Request("POST", QueuePath(queue, "/jobs"),
                 boost::json::serialize(boost::json::object{{"jobs", jobs}}));
}
HttpResult Client::Fetch(std::string_view queue, std::string_view worker, int max, int64_t lease_ms,
                         int64_t wait_ms, const std::vector<std::string>& ack) {
  boost::json::object body{
      {"worker", worker}, {"max", max}, {"lease_ms", lease_ms}, {"wait_ms", wait_ms}};
  if (!ack.empty()) body["ack"] = LeaseArray(ack);
  return Request("POST", QueuePath(queue, "/fetch"), boost::json::serialize(body));
}
HttpResult Client::Ack(std::string_view queue, const std::vector<std::string>& leases) {
  return Request("POST", QueuePath(queue, "/ack"),
                 boost::json::serialize(boost::json::object{{"leases", LeaseArray(leases)}}));
}
HttpResult Client::Nack(std::string_view queue, const std::vector<std::string>& leases,
                        std::optional<int64_t> delay_ms, std::string_view error) {
  boost::json::object body{{"leases", LeaseArray(leases)}};
  if (delay_ms) body["delay_ms"] = *delay_ms;
  if (!error.empty()) body["error"] = error;
  return Request("POST", QueuePath(queue, "/nack"), boost::json::serialize(body));
}
HttpResult Client::Extend(std::string_view queue, const std::vector<std::string>& leases,
                          int64_t lease_ms) {
  boost::json::object body{{"leases", LeaseArray(leases)}, {"lease_ms", lease_ms}};
  return Request("POST", QueuePath(queue, "/extend"), boost::json::serialize(body));
}
HttpResult Client::QueueStats(std::string_view queue) { return Request("GET", QueuePath(queue)); }
HttpResult Client::ListQueues() { return Request("GET", "/v1/queues"); }

}  // namespace anteroom
