#include "http/request_head.h"

#include <iterator>

#include "common/wire_errors.h"

namespace anteroom::http {

void ConfigureRequestParser(RequestParser& parser) {
  parser.header_limit(kHeaderLimit);
  parser.body_limit(kHardBodyLimit);
}

size_t HeadEnd(std::string_view data) {
  size_t end = data.substr(0, kHeaderLimit).find("\r\n\r\n");
  return end == std::string_view::npos ? end : end + 4;
}

bool HasBareLf(std::string_view data) {
  data = data.substr(0, kHeaderLimit);
  for (size_t i = data.find('\n'); i != std::string_view::npos; i = data.find('\n', i + 1)) {
    if (i == 0 || data[i - 1] != '\r') return true;
  }
  return false;
}

std::optional<HeadRefusal> CheckRawHead(std::string_view head) {
  // A line of the head (after the request line) that starts with a space or a tab continues
  // the line before it. The last CRLF ends the head, so it is not looked at.
  for (size_t i = head.find("\r\n"); i != std::string_view::npos && i + 2 < head.size();
       i = head.find("\r\n", i + 2)) {
    char next = head[i + 2];
    if (next == ' ' || next == '\t') {
      return HeadRefusal{OpStatus::kInvalidArgument, std::string(wire::kObsFold)};
    }
  }
  return std::nullopt;
}

std::optional<HeadRefusal> CheckParsedHead(const RequestParser& parser, size_t body_limit) {
  const auto& header = parser.get();
  if (header.version() >= 11) {
    size_t hosts = header.count(boost::beast::http::field::host);
    if (hosts != 1) {
      return HeadRefusal{OpStatus::kInvalidArgument,
                         std::string(hosts == 0 ? wire::kNoHost : wire::kManyHosts)};
    }
  }
  if (header.count(boost::beast::http::field::transfer_encoding) != 0 && !parser.chunked()) {
    return HeadRefusal{OpStatus::kInvalidArgument, std::string(wire::kBadTransferEncoding)};
  }
  auto length = parser.content_length();
  if (length && *length > body_limit) {
    return HeadRefusal{OpStatus::kPayloadTooLarge, wire::BodyLargerThan(body_limit)};
  }
  return std::nullopt;
}

size_t FieldCount(const RequestParser& parser) {
  const auto& fields = parser.get().base();
  return static_cast<size_t>(std::distance(fields.begin(), fields.end()));
}

std::optional<HeadRefusal> CheckTrailer(const RequestParser& parser, size_t fields_in_head) {
  if (FieldCount(parser) != fields_in_head) {
    return HeadRefusal{OpStatus::kInvalidArgument, std::string(wire::kTrailerFields)};
  }
  return std::nullopt;
}

}  // namespace anteroom::http
