#pragma once
// Test support for per-client limits: a keep-alive HTTP connection that
// says which client it speaks for (X-Forwarded-For, believed by a server started with
// `--trusted-proxy 127.0.0.1/32`), with the status, Retry-After and JSON of each answer; and a
// solver of the rooms' proof-of-work puzzles, written apart from the server's code.

#include <boost/json/value.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "support/server_process.h"

namespace anteroom::testing {

struct AnswerAs {
  int status = 0;  // 0: no answer (transport error or timeout)
  std::optional<std::string> retry_after;
  std::string body;
  boost::json::value json;  // null when the body is not JSON
  std::string raw;          // the whole response, for failure messages
};

class ClientAs {
 public:
  // `address`: what X-Forwarded-For says; empty sends no header.
  ClientAs(uint16_t port, std::string address);
  // One request on the kept-alive connection (reconnected when the server closed it).
  AnswerAs Request(std::string_view method, std::string_view target, std::string_view body = {});
  AnswerAs Check(std::string_view room, std::string_view session, std::string_view extra = {});
  const std::string& address() const { return address_; }
  // Speaks for another client from the next request on (same connection).
  void set_address(std::string address) { address_ = std::move(address); }

 private:
  uint16_t port_;
  std::string address_;
  std::unique_ptr<RawConnection> conn_;
};

// The first solution ("0", "1", ...) such that SHA-256(nonce || solution) starts with
// `difficulty` zero bits (OpenSSL's SHA256 directly; about 2^difficulty hashes).
std::string SolvePow(std::string_view nonce, int difficulty);

}  // namespace anteroom::testing
