#pragma once
// Test support: the real `anteroom` binary as a child process (server or CLI), and a raw TCP
// connection for bytes no well-behaved client would send. Loopback only; every wait is bounded;
// every child is stopped by its PID.

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "support/temp_dir.h"

namespace anteroom::testing {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// In EXTRA_ENV of SpawnBinary (and so of ServerProcess): the child's RLIMIT_NOFILE, soft and
// hard, set in the child before exec. The variable is passed on too (the binary ignores it).
inline constexpr char kRlimitNofileVar[] = "ANTEROOM_TEST_RLIMIT_NOFILE";

// The built binary (ANTEROOM_BINARY, set by tests/CMakeLists.txt), or the one named by the
// environment's ANTEROOM_TEST_BINARY: today's tests against another build (e.g. to show a
// regression test fails on the code before its fix).
const char* BinaryPath();
// The load generators' binary (bench/load: anteroom-bench), built beside it.
const char* BenchBinaryPath();

// fork + execve of `anteroom ARGS...` with ANTEROOM_* cleared from the inherited environment
// (so a developer's shell cannot change what a test sees) and EXTRA_ENV added; stdin is
// /dev/null, stdout goes to out_fd and stderr to err_fd (inherited when err_fd < 0). The child
// gets SIGKILL when the forking thread exits, so it never outlives the test: spawn from a thread
// that outlives the child. Answers the PID, or -1 with *error set. Shared by ServerProcess,
// RunCli and WorkerProcess, so every child is started the same way.
pid_t SpawnBinary(std::vector<std::string> args, const EnvVars& extra_env, int out_fd, int err_fd,
                  std::string* error, const char* binary = nullptr);  // nullptr: BinaryPath()

// A TCP connection to 127.0.0.1:PORT (non-blocking socket, TCP_NODELAY), or -1
// when it cannot be made within `timeout`. Shared by RawConnection and the Redis helpers.
int ConnectLoopback(uint16_t port, std::chrono::milliseconds timeout);

// `anteroom serve --listen 127.0.0.1:0 EXTRA_ARGS...` with ANTEROOM_* variables cleared from the
// inherited environment and EXTRA_ENV added. Unless EXTRA_ARGS name --data, --memory-only or
// --store, the server gets a fresh data directory of its own (removed with the object), so
// every test runs the durable backend. The constructor waits (bounded) for the line
// "anteroom listening on http://127.0.0.1:PORT"; check started() (and error()) before use.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> extra_args = {}, EnvVars extra_env = {},
                         std::chrono::milliseconds start_timeout = std::chrono::seconds(10));
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool started() const { return started_; }
  const std::string& error() const { return error_; }
  const std::string& url() const { return url_; }  // http[s]://127.0.0.1:PORT
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  // True while the child has not exited (reaps it if it has).
  bool Alive();
  // Everything the child wrote to stdout so far (it keeps being drained, so the child never
  // blocks or gets SIGPIPE on a full or closed pipe).
  std::string Output() const;
  // Everything the child wrote to stderr so far (its logs), drained the same way.
  std::string Errors() const;
  // SIGTERM, up to `grace` for it to exit, then SIGKILL; always reaps. Returns the wait status
  // (as waitpid gives it), or -1 if the child was already reaped or never started.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  void Drain(int out_fd, int err_fd);

  std::unique_ptr<TempDir> data_dir_;  // when the caller named none

  pid_t pid_ = -1;
  bool started_ = false;
  bool reaped_ = false;
  int wait_status_ = -1;
  std::string error_;
  std::string url_;
  uint16_t port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;  // guarded by mu_
  std::string errors_;  // guarded by mu_
  bool eof_ = false;    // guarded by mu_
  std::thread drainer_;
};

struct CliResult {
  int exit_code = -1;  // the exit status, 128 + signal when killed, -1 if it never ran
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs `anteroom ARGS...` (ANTEROOM_* cleared from the environment, EXTRA_ENV added) and
// captures stdout, stderr and the exit code. Killed by PID after `timeout`.
CliResult RunCli(const std::vector<std::string>& args, const EnvVars& extra_env = {},
                 std::chrono::milliseconds timeout = std::chrono::seconds(20));
// The same for `anteroom-bench ARGS...`.
CliResult RunBench(const std::vector<std::string>& args, const EnvVars& extra_env = {},
                   std::chrono::milliseconds timeout = std::chrono::seconds(20));

// One raw TCP connection to 127.0.0.1:port, for malformed HTTP.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends every byte; false if the peer is gone.
  bool Send(std::string_view bytes);
  // Half-closes our side (the server sees end of stream).
  void ShutdownWrite();
  // Reads one HTTP response (head, then Content-Length bytes of body). Empty when the server
  // closed the connection or said nothing before the timeout.
  std::string ReadResponse(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads until the server closes (true) or the timeout passes (false); data is appended.
  bool ReadUntilClosed(std::string& data,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  // Reads what is available into buffer_ within the deadline; false on close, error or timeout.
  bool Fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buffer_;
  bool closed_ = false;
};

// Sends `bytes` on a fresh connection and returns everything the server answered before it
// closed or the timeout passed.
std::string RawExchange(uint16_t port, std::string_view bytes,
                        std::chrono::milliseconds timeout = std::chrono::seconds(5));

// The status of a raw response ("HTTP/1.1 400 Bad Request..." -> 400), 0 if there is none.
int RawStatus(std::string_view response);
// A header's value in a raw response (name case-insensitive), nullopt if absent.
std::optional<std::string> RawHeader(std::string_view response, std::string_view name);
// The body of a raw response (after the blank line).
std::string RawBody(std::string_view response);
// "METHOD TARGET HTTP/1.1" with Host, Content-Length (when a body is given) and extra header
// lines ("Name: value").
std::string RawRequest(std::string_view method, std::string_view target, std::string_view body = {},
                       const std::vector<std::string>& headers = {});

}  // namespace anteroom::testing
