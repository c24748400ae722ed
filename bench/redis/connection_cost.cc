// What one Redis command costs the client side of `store::redis::Connection`, plain or TLS:
// WINDOW commands (GET of a 100-byte value) kept in flight on one connection, as many
// concurrent requests keep them, TOTAL in all. Prints one JSON line: commands per second and
// this process's CPU (user + system) per command. Loopback only; needs a running redis-server.
//
//   connection_cost URL [TOTAL] [WINDOW] [CA-FILE]
//
// URL is redis://HOST:PORT or rediss://HOST:PORT (CA-FILE: the CA that signed its
// certificate; default: the system's trust store).
#include <sys/resource.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "store/redis/connection.h"
#include "store/redis/redis_tls.h"
#include "store/redis/redis_url.h"

namespace redis = anteroom::store::redis;

namespace {
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: connection_cost URL [TOTAL] [WINDOW] [CA-FILE]\n");
    return 2;
  }
  std::string error;
  auto url = redis::ParseRedisUrl(argv[1], error);
  if (!url || url->cluster) {
    std::fprintf(stderr, "connection_cost: %s\n",
                 url ? "one server, not a cluster" : error.c_str());
    return 2;
  }
  long total = argc > 2 ? std::atol(argv[2]) : 300'000;
  long window = argc > 3 ? std::atol(argv[3]) : 50;
  redis::RedisTlsFiles files;
  if (argc > 4) files.ca_file = argv[4];

  boost::asio::io_context io;
  redis::ConnectionOptions options;
  options.timeout_ms = 10'000;
  options.tls = redis::TlsContextFor(*url, files);
  auto conn = std::make_shared<redis::Connection>(io, url->seeds.front(), options);
  bool up = false;
  conn->Command({"SET", "connection-cost", std::string(100, 'x')}, [&](redis::Reply r) {
    up = !r.failed();
    if (!up) std::fprintf(stderr, "connection_cost: %s\n", r.str.c_str());
    io.stop();
  });
  io.run();
  if (!up) return 1;
  io.restart();

  long sent = 0, done = 0, failed = 0;
  std::string get = redis::FormatCommand({"GET", "connection-cost"});
  std::function<void()> send;
  send = [&] {
    ++sent;
    conn->Send(get, [&](redis::Reply r) {
      ++done;
      if (r.failed()) ++failed;
      if (sent < total) send();
      if (done == total) io.stop();
    });
  };
  auto start = std::chrono::steady_clock::now();
  double cpu_start = CpuSeconds();
  for (long i = 0; i < window && i < total; ++i) send();
  io.run();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double cpu = CpuSeconds() - cpu_start;
  std::printf(
      "{\"tool\":\"connection_cost\",\"tls\":%s,\"window\":%ld,\"commands\":%ld,\"failed\":%ld,"
      "\"commands_per_s\":%.0f,\"cpu_ns_per_command\":%.0f}\n",
      url->tls ? "true" : "false", window, total, failed, static_cast<double>(total) / seconds,
      cpu * 1e9 / static_cast<double>(total));
  conn->Close();
  return failed == 0 ? 0 : 1;
}
