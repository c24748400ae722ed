#pragma once
// The server's TCP socket: bound to one io_context's executor, so no operation pays for type
// erasure. Shared by HTTP connections and the live streams they turn into; with TLS on the
// listener, both run over TlsSocket instead (the same code, a template on the stream).
//
// TlsSocket is our own TlsStream (tls_stream.h), OpenSSL driven on the socket itself, not
// boost::asio::ssl::stream: that one's BIO pair and engine cost a copy each way and a layer of
// operations per record (docs/benchmarks.md, "TLS on the listener").

#include "http/tcp_socket.h"
#include "http/tls_stream.h"

namespace anteroom::http {

using TlsSocket = TlsStream;

}  // namespace anteroom::http
