#pragma once
// A keep-alive HTTP/1.1 connection for the load generators: requests are queued and written
// together while a write is in flight (HTTP pipelining), and answers come back in the order of
// the requests to OnAnswer. All calls must run on the connection's own io_context thread.

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace anteroom::load {

class PipelinedConn : public std::enable_shared_from_this<PipelinedConn> {
 public:
  using tcp = boost::asio::ip::tcp;

  PipelinedConn(boost::asio::io_context& ioc, std::string host)
      : socket_(ioc), host_(std::move(host)) {}
  virtual ~PipelinedConn() = default;

  void Connect(const tcp::resolver::results_type& endpoints) {
    boost::asio::async_connect(
        socket_, endpoints,
        [self = shared_from_this()](boost::beast::error_code ec, const tcp::endpoint&) {
          if (ec) return self->OnFailure(ec.message());
          boost::beast::error_code ignored;
          self->socket_.set_option(tcp::no_delay(true), ignored);
          self->OnConnected();
          self->ReadMore();
        });
  }

  // Queues one request; `tag` comes back with its answer.
  void Send(std::string_view method, std::string_view path, std::string_view body, int tag) {
    fmt::format_to(std::back_inserter(queued_),
                   "{} {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n"
                   "Content-Length: {}\r\n\r\n{}",
                   method, path, host_, body.size(), body);
    tags_.push_back(tag);
    // Answers being handled now may send more: one write after them carries all.
    if (!writing_ && !handling_) Flush();
  }

  size_t Outstanding() const { return tags_.size(); }

  void Close() {
    closed_ = true;
    boost::beast::error_code ignored;
    socket_.close(ignored);
  }

 protected:
  virtual void OnConnected() = 0;
  virtual void OnAnswer(int tag, int status, std::string& body) = 0;
  virtual void OnFailure(const std::string& what) = 0;

 private:
  void Flush() {
    writing_ = true;
    writing_buffer_.swap(queued_);
    queued_.clear();
    boost::asio::async_write(socket_, boost::asio::buffer(writing_buffer_),
                             [self = shared_from_this()](boost::beast::error_code ec, size_t) {
                               self->writing_ = false;
                               if (ec) {
                                 if (!self->closed_) self->OnFailure(ec.message());
                                 return;
                               }
                               if (!self->queued_.empty()) self->Flush();
                             });
  }

  // Reads whatever arrived and parses every whole answer in it before the next write, so
  // requests sent in answer to a burst of answers leave in one write.
  void ReadMore() {
    socket_.async_read_some(buffer_.prepare(64 * 1024),
                            [self = shared_from_this()](boost::beast::error_code ec, size_t n) {
                              if (ec) {
                                if (!self->closed_) self->OnFailure(ec.message());
                                return;
                              }
                              self->buffer_.commit(n);
                              self->handling_ = true;
                              bool ok = self->ParseBuffered();
                              self->handling_ = false;
                              if (!ok || self->closed_) return;
                              if (!self->writing_ && !self->queued_.empty()) self->Flush();
                              self->ReadMore();
                            });
  }

  bool ParseBuffered() {
    while (buffer_.size() > 0 && !closed_) {
      if (!parser_) {
        parser_.emplace();
        parser_->body_limit(64 * 1024 * 1024);
        parser_->eager(true);
      }
      boost::beast::error_code ec;
      size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == boost::beast::http::error::need_more) return true;
      if (ec) {
        OnFailure("bad answer: " + ec.message());
        return false;
      }
      if (!parser_->is_done()) {
        if (used == 0) return true;
        continue;
      }
      if (tags_.empty()) {
        OnFailure("an answer nobody asked for");
        return false;
      }
      int tag = tags_.front();
      tags_.pop_front();
      auto& message = parser_->get();
      OnAnswer(tag, static_cast<int>(message.result_int()), message.body());
      parser_.reset();
    }
    return true;
  }

  tcp::socket socket_;
  std::string host_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
  std::string queued_;          // requests not yet handed to the socket
  std::string writing_buffer_;  // the write in flight
  std::deque<int> tags_;        // one per request still waiting for its answer
  bool writing_ = false;
  bool handling_ = false;  // inside ParseBuffered: Send only queues
  bool closed_ = false;
};

}  // namespace anteroom::load
