#pragma once
// What a request's head must pass before any handler sees it (RFC 9112), and the limits of
// what one request may make the server hold. Used by the connection (http_server.cc) and by
// the request path's fuzz target, so both see the same rules.

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/op_status.h"

namespace anteroom::http {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// The request line and header fields together.
inline constexpr size_t kHeaderLimit = 16 * 1024;
// What a connection's read buffer may hold at once: a head, or a chunked body's trailer. Beast
// parses a trailer outside the header limit (one field of 64 KiB made it throw and the
// process abort), so this bounds it.
inline constexpr size_t kReadBufferLimit = 32 * 1024;
// No route takes more (each route's own limit is lower: Router::BodyLimitFor).
inline constexpr size_t kHardBodyLimit = 64 * 1024 * 1024;

// The header limit and the hard body limit. The route's limit is set once the target is known.
void ConfigureRequestParser(RequestParser& parser);

// The offset just past the blank line that ends the head at the start of `data`, or npos when
// no whole head is there yet.
size_t HeadEnd(std::string_view data);
// Whether the head begun in `data` (no whole head yet) has a line ended by a bare LF. Only CRLF
// ends a line here; a proxy in front that takes a bare LF for one reads other lines, or another
// end of the head, than this server: refused at once rather than left to the head timeout.
bool HasBareLf(std::string_view data);

struct HeadRefusal {
  OpStatus status;
  std::string message;
};

// Checks of the raw head that Beast does not make: obsolete line folding (RFC 9112 5.2 lets a
// server reject it; a fold could hide a field from a proxy in front that reads it otherwise).
std::optional<HeadRefusal> CheckRawHead(std::string_view head);

// Checks of the parsed head: exactly one Host on HTTP/1.1 (RFC 9112 3.2), a Transfer-Encoding
// that ends in chunked (RFC 9112 6.3), a Content-Length within `body_limit`.
std::optional<HeadRefusal> CheckParsedHead(const RequestParser& parser, size_t body_limit);

// After the whole request: fields that arrived in a chunked body's trailer are refused (Beast
// merges them into the head, where a handler would read them as if the client had sent them
// first). `fields_in_head` is the number of fields the head held.
std::optional<HeadRefusal> CheckTrailer(const RequestParser& parser, size_t fields_in_head);

size_t FieldCount(const RequestParser& parser);

}  // namespace anteroom::http
