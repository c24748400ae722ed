#pragma once
// The server's TCP socket: bound to one io_context's executor, so no operation pays for type
// erasure. Its own header so that the TLS stream (tls_stream.h) and socket.h can both name it.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace anteroom::http {

using Socket =
    boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;

}  // namespace anteroom::http
