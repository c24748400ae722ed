#pragma once
// The server's TCP socket: bound to one io_context's executor, so no operation pays for type
// erasure. Shared by HTTP connections and the live streams they turn into; with TLS on the
// listener, both run over TlsSocket instead (the same code, a template on the stream).

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

namespace anteroom::http {

using Socket =
    boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;
using TlsSocket = boost::asio::ssl::stream<Socket>;

}  // namespace anteroom::http
