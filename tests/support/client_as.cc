#include "support/client_as.h"

#include <openssl/sha.h>

#include <boost/json/parse.hpp>

namespace anteroom::testing {

ClientAs::ClientAs(uint16_t port, std::string address)
    : port_(port), address_(std::move(address)) {}

AnswerAs ClientAs::Request(std::string_view method, std::string_view target,
                           std::string_view body) {
  std::vector<std::string> headers;
  if (!address_.empty()) headers.push_back("X-Forwarded-For: " + address_);
  std::string request = RawRequest(method, target, body, headers);
  AnswerAs out;
  for (int attempt = 0; attempt < 2 && out.status == 0; ++attempt) {
    if (!conn_ || !conn_->connected()) conn_ = std::make_unique<RawConnection>(port_);
    if (!conn_->Send(request)) {
      conn_.reset();
      continue;
    }
    out.raw = conn_->ReadResponse();
    out.status = RawStatus(out.raw);
    if (out.status == 0) conn_.reset();
  }
  if (out.status == 0) return out;
  out.retry_after = RawHeader(out.raw, "Retry-After");
  out.body = RawBody(out.raw);
  boost::system::error_code ec;
  out.json = boost::json::parse(out.body, ec);
  if (ec) out.json = nullptr;
  if (auto c = RawHeader(out.raw, "Connection"); c && *c == "close") conn_.reset();
  return out;
}

AnswerAs ClientAs::Check(std::string_view room, std::string_view session, std::string_view extra) {
  std::string body = "{\"session\":\"" + std::string(session) + "\"";
  if (!extra.empty()) body += "," + std::string(extra);
  body += "}";
  return Request("POST", "/v1/rooms/" + std::string(room) + "/check", body);
}

std::string SolvePow(std::string_view nonce, int difficulty) {
  for (uint64_t i = 0;; ++i) {
    std::string input(nonce);
    std::string solution = std::to_string(i);
    input += solution;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
    int bits = 0;
    for (unsigned char byte : digest) {
      if (byte == 0) {
        bits += 8;
        continue;
      }
      while ((byte & 0x80) == 0) {
        ++bits;
        byte = static_cast<unsigned char>(byte << 1);
      }
      break;
    }
    if (bits >= difficulty) return solution;
  }
}

}  // namespace anteroom::testing
