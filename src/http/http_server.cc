#include "http/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <type_traits>

#include "common/loop_turn.h"
#include "common/wire_errors.h"
#include "http/body_budget.h"
#include "http/live_stream.h"
#include "http/request_head.h"
#include "http/socket.h"
#include "http/tls_context.h"

namespace anteroom::http {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

using SteadyClock = std::chrono::steady_clock;
using UpgradeRequest = beast::http::request<beast::http::string_body>;

constexpr auto kWriteTimeout = std::chrono::seconds(30);  // a client that stops reading
// Timeouts are checked by a coarse sweep rather than a timer reset per request: a request then
// costs no timer work at all. Finer while a head or a body is arriving (their timeouts are
// short), coarse otherwise.
constexpr auto kSweepEvery = std::chrono::seconds(5);
constexpr auto kSweepWhileReading = std::chrono::seconds(1);
constexpr size_t kMaxBatch = 256 * 1024;  // answers queued for one write to pipelined requests
// Pipelined requests handled at once per connection. Their answers may complete out of order
// (a change waits for the log, a read does not) and are written in request order.
constexpr size_t kMaxInFlight = 64;
constexpr size_t kReadChunk = 16 * 1024;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

template <class Stream>
class HttpConnection : public Drainable,
                       public std::enable_shared_from_this<HttpConnection<Stream>> {
 public:
  // `open` is this connection's place in the count of live connections (the overload limit):
  // released when the connection ends, or handed to the live stream it turns into. `drains`
  // is told of the live stream it may become.
  HttpConnection(Stream stream, const Router& router, std::shared_ptr<void> open,
                 std::shared_ptr<const ConnectionLimits> limits, std::shared_ptr<BodyBudget> budget,
                 LiveStreamOptions live, std::shared_ptr<DrainList> drains)
      : stream_(std::move(stream)),
        sweep_(stream_.get_executor()),
        buffer_(kReadBufferLimit),
        router_(router),
        open_(std::move(open)),
        limits_holder_(std::move(limits)),
        limits_(*limits_holder_),
        budget_(std::move(budget)),
        live_(live),
        drains_(std::move(drains)) {
    beast::error_code ec;
    auto remote = Tcp().remote_endpoint(ec);
    if (!ec) peer_ = remote.address();
    // Only for the hang-up watch's peek: every other operation here is asynchronous.
    Tcp().non_blocking(true, ec);
  }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Handshake();
      } else {
        self->ReadHeader();
      }
      self->ArmSweep();
    });
  }

  void BeginDrain() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->StopForDrain(); });
  }

 private:
  static constexpr bool kTls = std::is_same_v<Stream, TlsSocket>;

  // The server is stopping: no request is read after those under way. A connection with
  // nothing asked closes now (a client whose request crossed this close retries it, as on any
  // kept-alive connection its server closed); parked requests are answered now with what they
  // have; the last answer says `Connection: close`.
  void StopForDrain() {
    if (closed_ || lingering_ || draining_) return;
    draining_ = true;
    stop_reading_ = true;
    if (slots_.empty() && out_.empty() && !writing_ && !handover_ && !reading_body_ &&
        buffer_.size() == 0) {
      return Close();
    }
    std::vector<std::shared_ptr<Hangup>> released;
    for (Slot& slot : slots_) {
      if (slot.hangup) released.push_back(slot.hangup);
    }
    for (auto& h : released) h->Release();  // may answer inline: slots_ may change
    Continue();
  }

  Socket& Tcp() { return beast::get_lowest_layer(stream_); }

  // Timed as a first head: a client that never finishes its handshake is closed within the
  // head timeout, as one that never finishes its first request is.
  void Handshake() {
    reading_head_ = true;
    stream_.async_handshake(
        net::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
          self->reading_head_ = false;
          if (ec) return self->Close();
          self->client_certificate_ = HasVerifiedPeer(self->stream_.native_handle());
          self->ReadHeader();
        });
  }

  enum class Phase : uint8_t { kReading, kHandling, kWriting };
  // One request handled or answered, not yet written out.
  struct Slot {
    unsigned version;
    bool keep_alive;
    std::optional<Response> response;
    bool close;
    std::shared_ptr<UpgradeRequest> upgrade;  // kept for a WebSocket handshake
    std::shared_ptr<Hangup> hangup;           // a request that may park: told if the client goes
  };
  // A stream route answered: the connection becomes a live stream once the answers before it
  // are written.
  struct Handover {
    std::function<void(std::shared_ptr<LiveStream>)> ready;
    unsigned version;
    std::shared_ptr<UpgradeRequest> upgrade;
    std::string headers;  // the answer's own header lines (CORS), for an event stream
  };

  void ArmSweep() {
    sweep_fine_ = NeedsFineSweep();
    sweep_.expires_after(sweep_fine_ ? kSweepWhileReading : kSweepEvery);
    sweep_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->closed_ || self->lingering_) return;
      self->Sweep();
    });
  }

  // A head under way (or a new connection's first), or a body: their timeouts are short.
  bool NeedsFineSweep() const {
    return reading_body_ || (reading_head_ && (buffer_.size() > 0 || requests_ == 0));
  }
  // Called when a read starts that the coarse sweep would time out too late. Costs a timer
  // re-arm only for heads that arrive in pieces and bodies that are not already buffered.
  void FineSweep() {
    if (!sweep_fine_ && !closed_ && !lingering_) ArmSweep();
  }

  // A request being handled is never timed out here; one being read or written is.
  void Sweep() {
    auto now = SteadyClock::now();
    if (reading_body_) {
      uint64_t received = parser_->get().body().size() + buffer_.size();
      if (received > body_received_) {
        body_received_ = received;
        body_progress_at_ = now;
        if (ticket_) ticket_->Progress(received, SteadyMs());
      }
      auto elapsed = now - body_started_;
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
      uint64_t owed = ms > limits_.body_stall.count()
                          ? limits_.min_body_rate * (ms - limits_.body_stall.count()) / 1000
                          : 0;
      if (now - body_progress_at_ > limits_.body_stall) {
        return TimeOut(wire::BodyStalled(limits_.body_stall.count()));
      }
      if (received < owed) {
        return TimeOut(wire::BodyTooSlow(limits_.min_body_rate));
      }
    } else if (reading_head_) {
      // No byte of a head yet: a new connection waits for its first request only as long as
      // for a head; a kept-alive one as long as the idle timeout.
      if (buffer_.size() == 0 && requests_ > 0) {
        if (now - phase_since_ > limits_.idle_timeout) return Close();
      } else if (now - head_started_ > limits_.head_timeout) {
        if (buffer_.size() == 0) return Close();  // never sent a byte: nobody to answer
        return TimeOut(wire::HeadTooSlow(limits_.head_timeout.count()));
      }
    } else if (phase_ == Phase::kWriting && now - phase_since_ > kWriteTimeout) {
      return Close();
    }
    ArmSweep();
  }

  // A head or body too slow: the read is cancelled, and its failure answers 408.
  void TimeOut(std::string message) {
    timed_out_ = std::move(message);
    beast::error_code ignored;
    Tcp().cancel(ignored);
  }

  void EnterPhase(Phase phase) {
    if (phase != phase_) {
      phase_ = phase;
      phase_since_ = SteadyClock::now();
    }
  }

  // Reads the next head: parsed from the buffer once it holds a whole one (the raw bytes are
  // checked first, for what Beast accepts and we do not), else read on.
  void ReadHeader() {
    parser_.emplace();
    ConfigureRequestParser(*parser_);
    reading_ = true;
    reading_head_ = true;
    head_started_ = requests_ == 0 ? accepted_ : SteadyClock::now();
    UpdatePhase();
    ParseHeadOrRead();
  }

  void ParseHeadOrRead() {
    auto data = buffer_.cdata();
    std::string_view pending(static_cast<const char*>(data.data()), data.size());
    size_t end = HeadEnd(pending);
    if (end == std::string_view::npos) {
      if (HasBareLf(pending)) {
        return HeadFailed({OpStatus::kInvalidArgument, std::string(wire::kBareLf)});
      }
      if (pending.size() >= kHeaderLimit) {
        return HeadFailed({OpStatus::kHeaderTooLarge, wire::HeadLargerThan(kHeaderLimit)});
      }
      if (buffer_.size() > 0 || requests_ == 0) FineSweep();
      size_t room = std::min(kReadChunk, buffer_.max_size() - buffer_.size());
      stream_.async_read_some(
          buffer_.prepare(room), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
            if (ec) return self->ReadFailed(ec);
            if (self->buffer_.size() == 0 && self->requests_ > 0) {
              self->head_started_ = SteadyClock::now();  // the first byte of this head
            }
            self->buffer_.commit(n);
            self->ParseHeadOrRead();
          });
      return;
    }
    if (auto refusal = CheckRawHead(pending.substr(0, end))) return HeadFailed(std::move(*refusal));
    beast::error_code ec;
    size_t used = parser_->put(net::buffer(pending.data(), end), ec);
    buffer_.consume(used);
    if (!ec && !parser_->is_header_done()) {
      ec = beast::http::error::need_more;  // never: a whole head
    }
    if (ec) return ReadFailed(ec);
    OnHeader();
  }

  void HeadFailed(HeadRefusal refusal) {
    reading_ = false;
    reading_head_ = false;
    Send(ErrorReply(refusal.status, refusal.message), /*close=*/true);
  }

  void OnHeader() {
    reading_head_ = false;
    reading_ = false;
    ++requests_;
    auto& header = parser_->get();
    size_t limit = router_.BodyLimitFor(header.target());
    parser_->body_limit(limit);
    if (auto refusal = CheckParsedHead(*parser_, limit)) {
      return Send(ErrorReply(refusal->status, refusal->message), /*close=*/true);
    }
    fields_in_head_ =
        parser_->chunked() ? FieldCount(*parser_) : 0;  // only a chunked body has a trailer
    // A body over the default limit is held against the server-wide budget for as long as it
    // is being read. A chunked one does not say its size: it may grow to the route's limit.
    auto length = parser_->content_length();
    size_t holds = length ? *length : parser_->chunked() ? limit : 0;
    if (holds > kDefaultBodyLimit) {
      ticket_ = budget_->Reserve(holds, SteadyMs(),
                                 [weak = this->weak_from_this(), ex = stream_.get_executor()] {
                                   net::post(ex, [weak] {
                                     if (auto self = weak.lock(); self && self->reading_body_)
                                       self->Close();
                                   });
                                 });
      if (!ticket_) {
        Response busy = ErrorReply(OpStatus::kUnavailable, wire::kTooManyBodies);
        busy.headers.emplace_back("Retry-After", "1");
        return Send(std::move(busy), /*close=*/true);
      }
    }
    // The interim answer only when nothing else is on its way out (it must not overtake earlier
    // answers); otherwise the client sends the body after its own short wait, as RFC 9110 lets.
    if (beast::iequals(header[http::field::expect], "100-continue") && !writing_ &&
        slots_.empty() && out_.empty()) {
      writing_ = true;
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this()](beast::error_code wec, size_t) {
                         self->writing_ = false;
                         if (wec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    reading_ = true;
    reading_body_ = !parser_->is_done();
    body_started_ = body_progress_at_ = SteadyClock::now();
    body_received_ = 0;
    auto length = parser_->content_length();
    if (!parser_->chunked() && (!reading_body_ || (length && buffer_.size() >= *length))) {
      // The whole body is already buffered (or there is none): parse it here and handle the
      // request in this handler. Through async_read it would complete in a posted handler,
      // behind every other connection's ready work, and its answer would wait for all of them:
      // a worker with one request in flight would see the whole round as its latency.
      return ParseBufferedBody();
    }
    if (reading_body_) FineSweep();
    UpdatePhase();
    beast::http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRequest(ec); });
  }

  void ParseBufferedBody() {
    beast::error_code ec;
    parser_->eager(true);
    while (!ec && !parser_->is_done()) {
      size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (!ec && used == 0) ec = beast::http::error::need_more;  // never: the body is all there
    }
    if (ec) return ReadFailed(ec);
    OnRequest({});
  }

  void ReadFailed(beast::error_code ec) {
    reading_ = false;
    reading_head_ = false;
    reading_body_ = false;
    ticket_.reset();
    if (timed_out_) {
      std::string message = std::move(*timed_out_);
      timed_out_.reset();
      return Send(ErrorReply(OpStatus::kRequestTimeout, message), true);
    }
    if (ec == beast::http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::error::bad_descriptor ||
        ec == net::error::connection_reset) {
      return Close();
    }
    if (ec == beast::http::error::body_limit) {
      return Send(ErrorReply(OpStatus::kPayloadTooLarge, wire::kBodyTooLarge), true);
    }
    if (ec == beast::http::error::header_limit) {
      return Send(ErrorReply(OpStatus::kHeaderTooLarge, wire::kHeadTooLarge), true);
    }
    if (ec == beast::http::error::buffer_overflow) {
      // Only a trailer can fill the read buffer: heads stop at the header limit first.
      return Send(ErrorReply(OpStatus::kHeaderTooLarge, wire::kTrailerTooLarge), true);
    }
    // Anything else is a malformed request: answer it, then hang up.
    Send(ErrorReply(OpStatus::kInvalidArgument, wire::MalformedRequest(ec.message())), true);
  }

  void OnRequest(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    reading_ = false;
    reading_body_ = false;
    ticket_.reset();
    if (auto refusal =
            parser_->chunked() ? CheckTrailer(*parser_, fields_in_head_) : std::nullopt) {
      return Send(ErrorReply(refusal->status, refusal->message), /*close=*/true);
    }
    auto message = parser_->release();
    // Each request lives until its answer: the next may be handled before this one answers.
    auto request = std::make_shared<Request>();
    request->method = message.method();
    request->target = std::string(message.target());
    request->body = std::move(message.body());
    request->authorization = std::string(message[http::field::authorization]);
    request->origin = std::string(message[http::field::origin]);
    request->host = std::string(message[http::field::host]);
    request->forwarded_host = std::string(message["X-Forwarded-Host"]);
    request->content_type = std::string(message[http::field::content_type]);
    // Every X-Forwarded-For line, in order, as one list (RFC 9110 5.3): a proxy that adds a
    // line of its own (HAProxy's `option forwardfor`) must not leave the client's line alone.
    auto forwarded = message.equal_range("X-Forwarded-For");
    for (auto it = forwarded.first; it != forwarded.second; ++it) {
      if (!request->forwarded_for.empty()) request->forwarded_for += ", ";
      request->forwarded_for.append(it->value());
    }
    request->peer = peer_;
    request->client_certificate = client_certificate_;
    uint64_t seq = first_seq_ + slots_.size();
    slots_.push_back(
        {message.version(), message.keep_alive(), std::nullopt, false, nullptr, nullptr});
    if (!message.keep_alive()) stop_reading_ = true;  // its answer closes the connection
    if (message.method() == http::verb::get && router_.MayStream(request->target)) {
      stop_reading_ = true;  // nothing is read after a request that may become a stream
      request->websocket = beast::websocket::is_upgrade(message);
      if (request->websocket) slots_.back().upgrade = std::make_shared<UpgradeRequest>(message);
    }
    // Last: what came before still read the message's headers.
    request->fields = std::move(static_cast<http::fields&>(message));
    UpdatePhase();
    // The handler may answer from another thread: come back to this connection's thread.
    auto respond = [self = this->shared_from_this(), seq](Response response) {
      net::dispatch(self->stream_.get_executor(), [self, seq, r = std::move(response)]() mutable {
        self->Answered(seq, std::move(r), false);
      });
    };
    try {
      router_.Dispatch(*request, std::move(respond));
    } catch (const std::exception& e) {
      // A handler that throws loses its request, not the process: this connection answers 500
      // and closes (whatever the handler may still answer is dropped with it).
      spdlog::error("request {} {}: {}", std::string(http::to_string(request->method)),
                    request->target.substr(0, 200), e.what());
      closing_ = true;
      slots_.clear();
      Format({11, false, ErrorReply(OpStatus::kInternal, wire::kRequestFailed), true, nullptr,
              nullptr});
    }
    if (request->hangup && !closing_) {
      // Its answer may be long in coming (a long poll): watch the socket meanwhile.
      if (!slots_.empty() && seq >= first_seq_ && !slots_[seq - first_seq_].response) {
        slots_[seq - first_seq_].hangup = request->hangup;
        ++watched_;
      }
    }
    Continue();
  }

  // An answer that needs no handler (malformed request, over a limit): after the others.
  void Send(Response response, bool close) {
    stop_reading_ = true;
    slots_.push_back({version_of_last(), false, std::nullopt, false, nullptr, nullptr});
    Answered(first_seq_ + slots_.size() - 1, std::move(response), close);
  }

  unsigned version_of_last() const {
    return slots_.empty() ? last_version_ : slots_.back().version;
  }

  // Files an answer; the answers now complete at the head go into out_, in request order.
  void Answered(uint64_t seq, Response response, bool close) {
    if (closed_ || seq < first_seq_ || seq - first_seq_ >= slots_.size()) return;
    Slot& slot = slots_[seq - first_seq_];
    slot.response = std::move(response);
    slot.close = close || slot.response->close || !slot.keep_alive;
    if (slot.hangup) {
      slot.hangup.reset();
      --watched_;
    }
    while (!slots_.empty() && slots_.front().response && !closing_) {
      if (slots_.front().response->stream) {
        Slot& head = slots_.front();
        std::string headers;
        for (const auto& [name, value] : head.response->headers) {
          headers += fmt::format("{}: {}\r\n", name, value);
        }
        handover_ = Handover{std::move(head.response->stream), head.version, head.upgrade,
                             std::move(headers)};
        closing_ = true;
        slots_.pop_front();
        ++first_seq_;
        break;
      }
      // Draining: the last answer closes the connection (one before it would drop the rest).
      if (draining_ && slots_.size() == 1 && !reading_) slots_.front().close = true;
      Format(slots_.front());
      if (slots_.front().close) closing_ = true;  // later answers are dropped with the line
      last_version_ = slots_.front().version;
      slots_.pop_front();
      ++first_seq_;
    }
    if (closing_) {
      slots_.clear();
      watched_ = 0;
    }
    // While handlers run inline (the memory backend), more buffered requests are parsed before
    // anything is written; the write happens when the buffer runs dry.
    if (!in_continue_) Continue();
  }

  void Format(const Slot& slot) {
    const Response& response = *slot.response;
    auto it = std::back_inserter(out_);
    // A 204 has no content, and says nothing of its type or length (RFC 9110 8.6).
    const bool no_content = response.status == 204;
    fmt::format_to(it, "HTTP/1.{} {} {}\r\nServer: anteroom\r\n", slot.version == 10 ? 0 : 1,
                   response.status,
                   beast::http::obsolete_reason(static_cast<beast::http::status>(response.status)));
    if (!no_content && !response.content_type.empty()) {
      fmt::format_to(it, "Content-Type: {}\r\n", response.content_type);
    }
    for (const auto& [name, value] : response.headers)
      fmt::format_to(it, "{}: {}\r\n", name, value);
    if (slot.close) {
      out_ += "Connection: close\r\n";
    } else if (slot.version == 10) {
      out_ += "Connection: keep-alive\r\n";
    }
    if (no_content) {
      out_ += "\r\n";
      return;
    }
    fmt::format_to(it, "Content-Length: {}\r\n\r\n", response.body.size());
    out_ += response.body;
  }

  // What next: parse a request already buffered, write the queued answers, or read more.
  //
  // Pipelined requests already in the read buffer are handled together, their answers queued,
  // and one write carries those ready when the buffer runs dry (or kMaxBatch bytes are
  // queued). The socket is read again once every answer has been written, as before pipelining.
  void Continue() {
    if (closed_ || in_continue_) return;
    in_continue_ = true;
    while (true) {
      if (!closing_ && !stop_reading_ && !reading_ && slots_.size() < kMaxInFlight &&
          out_.size() < kMaxBatch && NextRequestBuffered()) {
        ReadHeader();             // completes at once from the buffer (or reads the rest of a body)
        if (!reading_) continue;  // refused at once: its answer is queued
        break;
      }
      // Not while a buffered request is being parsed: its answer may join this write.
      if (!writing_ && !out_.empty() && !reading_) {
        StartWrite();
        break;
      }
      if (!writing_ && out_.empty() && slots_.empty()) {
        if (handover_) {
          HandOver();
        } else if ((closing_ || stop_reading_) && !reading_) {
          Linger();
        } else if (!reading_) {
          ReadHeader();
          if (!reading_) continue;
        }
      }
      break;
    }
    in_continue_ = false;
    UpdatePhase();
    if (watched_ > 0 && !watching_ && !watch_queued_ && !reading_ && !closed_ && !closing_) {
      QueueWatch();
    }
  }

  void StartWrite() {
    writing_ = true;
    writing_buffer_.swap(out_);
    phase_ = Phase::kWriting;  // each write has kWriteTimeout of its own
    phase_since_ = SteadyClock::now();
    net::async_write(stream_, net::buffer(writing_buffer_),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       self->writing_buffer_.clear();
                       if (ec) return self->Close();
                       self->Continue();
                     });
  }

  void UpdatePhase() {
    EnterPhase(writing_ ? Phase::kWriting : !slots_.empty() ? Phase::kHandling : Phase::kReading);
  }

  // True when a whole request header already waits in the read buffer: parsing it needs no
  // read from the socket, so holding the queued answers back cannot stall the client.
  bool NextRequestBuffered() const {
    auto data = buffer_.cdata();
    std::string_view pending(static_cast<const char*>(data.data()), data.size());
    return HeadEnd(pending) != std::string_view::npos;
  }

  // While a request that may park waits for its answer, nothing else reads this socket: wait
  // until it is readable, and tell the request when that means the client hung up.
  // Watching costs an epoll_ctl: most requests that may park are answered by the end of this
  // loop turn (the log's group write answers there, common/loop_turn.h), so look again then.
  void QueueWatch() {
    watch_queued_ = true;
    auto check = [self = this->shared_from_this()] {
      self->watch_queued_ = false;
      if (self->watched_ > 0 && !self->watching_ && !self->reading_ && !self->closed_ &&
          !self->closing_) {
        self->WatchForHangup();
      }
    };
    if (LoopTurn::Current() != nullptr) {
      LoopTurn::AtEnd(std::move(check));
    } else {
      net::post(stream_.get_executor(), std::move(check));
    }
  }

  void WatchForHangup() {
    watching_ = true;
    Tcp().async_wait(Socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
      self->watching_ = false;
      if (self->closed_ || self->watched_ == 0 || self->reading_) return;
      if (ec) return self->ClientGone();
      char byte;
      beast::error_code peek;
      size_t n = self->Tcp().receive(net::buffer(&byte, 1), Socket::message_peek, peek);
      if (peek == net::error::would_block) return self->WatchForHangup();
      if (peek || n == 0) return self->ClientGone();
      // More requests (pipelined): into the buffer, so the watch can go on behind them. A
      // client that fills the buffer is read again once its answers are out.
      size_t room = self->buffer_.max_size() - self->buffer_.size();
      if (room == 0) return;
      // A TLS read may have to write (a key update), into the one buffer a write in flight
      // uses: it waits for the write, whose end watches again.
      if constexpr (kTls) {
        if (self->writing_) return;
      }
      beast::error_code rec;
      size_t got = self->stream_.read_some(self->buffer_.prepare(room), rec);
      if (!rec) self->buffer_.commit(got);
      if (rec && rec != net::error::would_block) return self->ClientGone();
      self->WatchForHangup();
    });
  }

  // The client closed (or reset) while requests of its wait: they are told, and nothing more
  // is read. Their answers are still written, for a client that only half-closed.
  void ClientGone() {
    stop_reading_ = true;
    std::vector<std::shared_ptr<Hangup>> told;
    for (Slot& slot : slots_) {
      if (slot.hangup) told.push_back(slot.hangup);
    }
    for (auto& h : told) h->Signal();  // may answer inline: slots_ may change
  }

  // The socket leaves this connection for a live stream, with the connection's place in the count.
  void HandOver() {
    Handover h = std::move(*handover_);
    handover_.reset();
    closed_ = true;
    sweep_.cancel();
    auto ready = [h = std::move(h.ready), open = open_,
                  drains = drains_](std::shared_ptr<LiveStream> stream) {
      stream->Hold(open);
      drains->Add(stream);  // a stream started while the server drains is told at once
      h(std::move(stream));
    };
    if (h.upgrade) {
      LiveStream::AcceptWebSocket(std::move(stream_), std::move(buffer_), std::move(*h.upgrade),
                                  live_, std::move(ready));
    } else {
      LiveStream::StartEventStream(std::move(stream_), h.version, live_, std::move(h.headers),
                                   std::move(ready));
    }
  }

  // The last answer is written and the connection is to close: stop sending, then read and drop
  // what the client still sends (the rest of a refused body) until it closes too, for a bounded
  // time and byte count. Closing at once, with its bytes unread, would make the kernel answer
  // them with a reset, which can discard our answer before the client reads it.
  void Linger() {
    if (closed_ || lingering_) return;
    lingering_ = true;
    parser_.reset();
    ticket_.reset();
    beast::error_code ignored;
    Tcp().shutdown(tcp::socket::shutdown_send, ignored);
    sweep_.expires_after(limits_.linger);
    sweep_.async_wait([weak = this->weak_from_this()](beast::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->Close();
    });
    Drain();
  }

  void Drain() {
    stream_.async_read_some(buffer_.prepare(std::min(kReadChunk, buffer_.max_size())),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > self->limits_.linger_bytes) {
                                return self->Close();
                              }
                              self->Drain();
                            });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ticket_.reset();
    beast::error_code ignored;
    Tcp().shutdown(tcp::socket::shutdown_send, ignored);
    Tcp().close(ignored);
    sweep_.cancel();
    if (watched_ > 0) ClientGone();
  }

  Stream stream_;
  net::steady_timer sweep_;
  beast::flat_buffer buffer_;
  const Router& router_;
  std::shared_ptr<void> open_;
  std::shared_ptr<const ConnectionLimits> limits_holder_;
  const ConnectionLimits& limits_;
  std::shared_ptr<BodyBudget> budget_;
  std::shared_ptr<BodyBudget::Ticket> ticket_;  // the body being read, when a big one
  LiveStreamOptions live_;
  std::shared_ptr<DrainList> drains_;
  net::ip::address peer_;
  std::optional<Handover> handover_;
  std::optional<RequestParser> parser_;
  std::deque<Slot> slots_;  // requests in order, from first_seq_ on
  uint64_t first_seq_ = 0;
  unsigned last_version_ = 11;
  std::string out_;             // answers queued for the next write
  std::string writing_buffer_;  // the write in flight (one per connection)
  Phase phase_ = Phase::kReading;
  SteadyClock::time_point accepted_ = SteadyClock::now();
  SteadyClock::time_point phase_since_ = accepted_;
  SteadyClock::time_point head_started_ = accepted_;
  SteadyClock::time_point body_started_;
  SteadyClock::time_point body_progress_at_;
  uint64_t body_received_ = 0;
  uint64_t requests_ = 0;  // heads read on this connection
  size_t fields_in_head_ = 0;
  size_t watched_ = 0;  // unanswered requests with a hang-up to signal
  size_t drained_ = 0;
  std::optional<std::string> timed_out_;  // why the read in flight was cancelled
  bool reading_ = false;
  bool reading_head_ = false;
  bool reading_body_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool watch_queued_ = false;  // QueueWatch's check is pending
  bool stop_reading_ = false;  // a request that closes the connection, or a broken stream
  bool closing_ = false;       // an answer that closes the connection is queued
  bool closed_ = false;
  bool lingering_ = false;
  bool sweep_fine_ = false;  // the sweep is armed at kSweepWhileReading
  bool in_continue_ = false;
  bool client_certificate_ = false;  // the TLS client showed a certificate the server trusts
  bool draining_ = false;            // StopForDrain: no more requests, the last answer closes
};

}  // namespace

class HttpServer::Listener : public std::enable_shared_from_this<HttpServer::Listener> {
 public:
  Listener(IoPool& pool, const Router& router, const ConnectionLimits& limits,
           LiveStreamOptions live, std::shared_ptr<DrainList> drains)
      : pool_(pool),
        acceptor_(pool.Main()),
        backoff_(pool.Main()),
        router_(router),
        limits_(std::make_shared<const ConnectionLimits>(limits)),
        budget_(BodyBudget::Make(limits.max_buffered_bytes)),
        live_(live),
        drains_(std::move(drains)) {}

  tcp::endpoint Open(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    acceptor_.non_blocking(true);  // for the synchronous accepts after a completion
    return acceptor_.local_endpoint();
  }

  void Accept() {
    auto socket = std::make_shared<Socket>(pool_.Next().get_executor());
    acceptor_.async_accept(*socket, [self = shared_from_this(), socket](beast::error_code ec) {
      if (ec == net::error::operation_aborted) return;
      if (ec) return self->AcceptFailed(ec);
      self->TakeConnection(std::move(*socket));
      // Take what else waits in the backlog now: under load (live streams pushing) the next
      // completion waits behind every handler queued on the main context, which held
      // accepts to a few per second while thousands of clients connected.
      for (int i = 0; i < kAcceptBurst; ++i) {
        Socket next(self->pool_.Next().get_executor());
        beast::error_code again;
        self->acceptor_.accept(next, again);  // non-blocking: would_block when none waits
        if (again) break;
        self->TakeConnection(std::move(next));
      }
      self->Accept();
    });
  }

  void Close() {
    beast::error_code ignored;
    acceptor_.close(ignored);
    backoff_.cancel();
  }

  // Call on the main context. Connections accepted from now on use `tls` (nullptr: plain).
  void UseTls(std::shared_ptr<net::ssl::context> tls) { tls_ = std::move(tls); }
  // Connections and live streams holding a place in the count, from any thread.
  size_t open() const { return open_->load(std::memory_order_relaxed); }

 private:
  static constexpr int kAcceptBurst = 256;
  // Out of descriptors (or kernel memory), accepting again at once fails again at once: that
  // spun a core and wrote millions of log lines. Wait a little instead; a client is taken
  // again within this of a descriptor freeing.
  static constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);
  static constexpr auto kAcceptLogEvery = std::chrono::seconds(10);
  static constexpr auto kRefusalLinger = std::chrono::seconds(1);

  void AcceptFailed(beast::error_code ec) {
    ++accept_failures_;
    auto now = SteadyClock::now();
    if (now - last_accept_log_ >= kAcceptLogEvery) {
      spdlog::warn("accept failed: {} ({} time(s) since the last report; {} connections open)",
                   ec.message(), accept_failures_, open_->load(std::memory_order_relaxed));
      accept_failures_ = 0;
      last_accept_log_ = now;
    }
    backoff_.expires_after(kAcceptBackoff);
    backoff_.async_wait([self = shared_from_this()](beast::error_code wec) {
      if (!wec) self->Accept();
    });
  }

  // An accepted socket becomes an HttpConnection with its place in the count, or is refused
  // with the 503 below when the count is at its limit.
  void TakeConnection(Socket socket) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (open_->fetch_add(1, std::memory_order_relaxed) >= limits_->max_connections) {
      open_->fetch_sub(1, std::memory_order_relaxed);
      RefuseOverloaded(std::move(socket));
    } else {
      // Its place in the count, given back when the last holder lets go.
      std::shared_ptr<void> place(nullptr, [open = open_](std::nullptr_t) {
        open->fetch_sub(1, std::memory_order_relaxed);
      });
      Start(std::move(socket), std::move(place));
    }
  }

  void Start(Socket socket, std::shared_ptr<void> place) {
    if (!tls_) {
      return Begin(std::make_shared<HttpConnection<Socket>>(
          std::move(socket), router_, std::move(place), limits_, budget_, live_, drains_));
    }
    // The connection (and the live stream it may become) keeps the context it started with: a
    // reload swaps tls_ for the connections to come.
    std::shared_ptr<void> held(nullptr, [place = std::move(place), tls = tls_](std::nullptr_t) {});
    Begin(std::make_shared<HttpConnection<TlsSocket>>(TlsSocket(std::move(socket), *tls_), router_,
                                                      std::move(held), limits_, budget_, live_,
                                                      drains_));
  }

  template <class Connection>
  void Begin(const std::shared_ptr<Connection>& connection) {
    drains_->Add(connection);  // told at once if the server drains already
    connection->Start();
  }

  // Over the connection limit: one short 503 and hang up, so clients back off and retry
  // instead of the server running out of file descriptors. What the client sent meanwhile is
  // drained briefly, so the 503 is read rather than lost to a reset.
  void RefuseOverloaded(Socket socket) {
    // A TLS client would read the plain 503 as a broken handshake, and a handshake is the costly
    // part of a TLS connection: over the limit it is closed unanswered.
    if (tls_) return;
    if (refusing_->fetch_add(1, std::memory_order_relaxed) >= limits_->max_refusing) {
      refusing_->fetch_sub(1, std::memory_order_relaxed);
      return;  // the socket closes here
    }
    struct Refusal {
      Refusal(Socket s, std::shared_ptr<std::atomic<size_t>> c)
          : sock(std::move(s)), timer(sock.get_executor()), count(std::move(c)) {}
      ~Refusal() { count->fetch_sub(1, std::memory_order_relaxed); }
      Socket sock;
      net::steady_timer timer;
      std::shared_ptr<std::atomic<size_t>> count;
      std::string text;
      std::array<char, 4096> scratch;
      size_t drained = 0;
    };
    auto r = std::make_shared<Refusal>(std::move(socket), refusing_);
    std::string body = ErrorReply(OpStatus::kUnavailable, wire::kTooManyConnections).body;
    r->text = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nServer: anteroom\r\nContent-Type: "
        "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
    net::dispatch(r->sock.get_executor(), [r] {
      net::async_write(r->sock, net::buffer(r->text), [r](beast::error_code ec, size_t) {
        if (ec) return;
        beast::error_code ignored;
        r->sock.shutdown(tcp::socket::shutdown_send, ignored);
        r->timer.expires_after(kRefusalLinger);
        r->timer.async_wait([r](beast::error_code) {
          beast::error_code ignored2;
          r->sock.close(ignored2);
        });
        DrainRefused(r);
      });
    });
  }

  template <typename R>
  static void DrainRefused(std::shared_ptr<R> r) {
    r->sock.async_read_some(net::buffer(r->scratch), [r](beast::error_code ec, size_t n) {
      r->drained += n;
      if (ec || r->drained > kDefaultBodyLimit) {
        r->timer.cancel();
        return;
      }
      DrainRefused(r);
    });
  }

  IoPool& pool_;
  tcp::acceptor acceptor_;
  net::steady_timer backoff_;
  const Router& router_;
  std::shared_ptr<const ConnectionLimits> limits_;
  std::shared_ptr<BodyBudget> budget_;
  LiveStreamOptions live_;
  std::shared_ptr<DrainList> drains_;
  std::shared_ptr<net::ssl::context> tls_;
  std::shared_ptr<std::atomic<size_t>> open_ = std::make_shared<std::atomic<size_t>>(0);
  std::shared_ptr<std::atomic<size_t>> refusing_ = std::make_shared<std::atomic<size_t>>(0);
  uint64_t accept_failures_ = 0;
  SteadyClock::time_point last_accept_log_{};
};

HttpServer::HttpServer(IoPool& pool, const Router& router, ConnectionLimits limits,
                       LiveStreamOptions live)
    : pool_(pool), router_(router), limits_(limits), live_(live) {}

HttpServer::~HttpServer() { Close(); }

tcp::endpoint HttpServer::Listen(const std::string& host, uint16_t port) {
  listener_ = std::make_shared<Listener>(pool_, router_, limits_, live_, drains_);
  listener_->UseTls(tls_);
  tcp::endpoint bound = listener_->Open({net::ip::make_address(host), port});
  listener_->Accept();
  return bound;
}

void HttpServer::UseTls(std::shared_ptr<net::ssl::context> tls) {
  tls_ = tls;
  if (listener_) {
    net::post(pool_.Main(),
              [l = listener_, tls = std::move(tls)]() mutable { l->UseTls(std::move(tls)); });
  }
}

void HttpServer::Close() {
  if (listener_) {
    net::post(pool_.Main(), [l = listener_] { l->Close(); });
  }
}

void HttpServer::Drain() {
  Close();
  drains_->Drain();
}

size_t HttpServer::OpenConnections() const { return listener_ ? listener_->open() : 0; }

}  // namespace anteroom::http
