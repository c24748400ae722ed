#include "support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace anteroom::testing {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Then "://" or "s://" (TLS), and 127.0.0.1:PORT.
constexpr std::string_view kListening = "anteroom listening on http";
constexpr std::string_view kLoopback = "://127.0.0.1:";

int MillisLeft(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
}

// The inherited environment without ANTEROOM_* (so a developer's shell cannot change what a
// test sees), plus extra_env.
std::vector<std::string> ChildEnvironment(const EnvVars& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "ANTEROOM_", 9) == 0) continue;
    env.emplace_back(*e);
  }
  for (const auto& [name, value] : extra_env) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Kills and reaps pid: SIGTERM (unless skipped), bounded wait, SIGKILL, blocking reap.
int KillAndReap(pid_t pid, std::chrono::milliseconds grace, bool term_first) {
  int status = 0;
  if (term_first) {
    kill(pid, SIGTERM);
    auto deadline = SteadyClock::now() + grace;
    while (SteadyClock::now() < deadline) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) return status;
      if (r < 0 && errno != EINTR) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace

const char* BinaryPath() {
  static const char* path = [] {
    const char* other = std::getenv("ANTEROOM_TEST_BINARY");
    return other && *other ? other : ANTEROOM_BINARY;
  }();
  return path;
}

const char* BenchBinaryPath() { return ANTEROOM_BENCH_BINARY; }

// Between fork and exec the child only makes async-signal-safe calls.
pid_t SpawnBinary(std::vector<std::string> args, const EnvVars& extra_env, int out_fd, int err_fd,
                  std::string* error, const char* binary) {
  args.insert(args.begin(), binary != nullptr ? binary : BinaryPath());
  std::vector<std::string> env = ChildEnvironment(extra_env);
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env);
  // A test may give the child a lower RLIMIT_NOFILE (soft and hard), read here, before the
  // fork: the child must not allocate.
  rlim_t nofile = 0;
  for (const auto& [name, value] : extra_env) {
    if (name == kRlimitNofileVar) nofile = std::strtoull(value.c_str(), nullptr, 10);
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    // Never outlive the test process, even if it crashes before stopping us. (The signal
    // comes when the forking thread exits: spawn from a thread that outlives the child.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
    if (nofile != 0) {
      rlimit limit{nofile, nofile};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// ---- ServerProcess -----------------------------------------------------------------------

ServerProcess::ServerProcess(std::vector<std::string> extra_args, EnvVars extra_env,
                             std::chrono::milliseconds start_timeout) {
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    return;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    error_ = std::string("pipe: ") + std::strerror(errno);
    close(out[0]);
    close(out[1]);
    return;
  }
  std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0"};
  bool named = std::any_of(extra_args.begin(), extra_args.end(), [](const std::string& a) {
    return a == "--data" || a.rfind("--data=", 0) == 0 || a == "--memory-only" || a == "--store" ||
           a.rfind("--store=", 0) == 0;
  });
  if (!named) {
    data_dir_ = std::make_unique<TempDir>("anteroom-serve");
    args.insert(args.end(), {"--data", data_dir_->path().string()});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = SpawnBinary(std::move(args), extra_env, out[1], err[1], &error_);
  close(out[1]);
  close(err[1]);
  if (pid_ < 0) {
    close(out[0]);
    close(err[0]);
    return;
  }
  drainer_ = std::thread([this, out_fd = out[0], err_fd = err[0]] { Drain(out_fd, err_fd); });

  auto deadline = SteadyClock::now() + start_timeout;
  std::string line;
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] {
      size_t at = output_.find(kListening);
      if (at != std::string::npos) {
        size_t end = output_.find('\n', at);
        if (end != std::string::npos) {
          line = output_.substr(at, end - at);
          return true;
        }
      }
      return eof_;
    });
  }
  if (line.empty()) {
    error_ = "`anteroom serve` did not print \"" + std::string(kListening) + "[s]" +
             std::string(kLoopback) + "PORT\" within " + std::to_string(start_timeout.count()) +
             " ms; stdout so far:\n" + Output() + "\nstderr so far:\n" + Errors();
    Stop();
    return;
  }
  // The port's digits: with --log-format json the line is a JSON object, the URL inside it.
  std::string port_text = line.substr(kListening.size());
  const bool tls = port_text.starts_with("s");
  if (tls) port_text.erase(0, 1);
  if (!port_text.starts_with(kLoopback)) {
    error_ = "not a loopback URL: " + line;
    Stop();
    return;
  }
  port_text.erase(0, kLoopback.size());
  port_text = port_text.substr(0, port_text.find_first_not_of("0123456789"));
  int port = 0;
  bool digits =
      !port_text.empty() && port_text.size() <= 5 &&
      std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) port = std::stoi(port_text);
  if (port <= 0 || port > 65535) {
    error_ = "cannot read the port from the line: " + line;
    Stop();
    return;
  }
  port_ = static_cast<uint16_t>(port);
  url_ = std::string(tls ? "https" : "http") + std::string(kLoopback) + std::to_string(port_);
  started_ = true;
}

ServerProcess::~ServerProcess() { Stop(); }

void ServerProcess::Drain(int out_fd, int err_fd) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    // No deadline: the pipes close when the child exits, and Stop() makes sure it does.
    int n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char chunk[4096];
      ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      std::lock_guard lock(mu_);
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? output_ : errors_).append(chunk, static_cast<size_t>(got));
      }
      cv_.notify_all();
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  std::lock_guard lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

bool ServerProcess::Alive() {
  if (pid_ < 0 || reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    wait_status_ = status;
    return false;
  }
  return r == 0;
}

std::string ServerProcess::Output() const {
  std::lock_guard lock(mu_);
  return output_;
}

std::string ServerProcess::Errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

int ServerProcess::Stop(std::chrono::milliseconds grace) {
  int status = -1;
  if (pid_ > 0 && Alive()) {
    status = KillAndReap(pid_, grace, /*term_first=*/true);
    reaped_ = true;
    wait_status_ = status;
  } else if (reaped_) {
    status = wait_status_;
  }
  // The pipe reaches end of file once the child is gone.
  if (drainer_.joinable()) drainer_.join();
  return status;
}

// ---- RunCli --------------------------------------------------------------------------------

namespace {

CliResult RunBinary(const char* binary, const std::vector<std::string>& args,
                    const EnvVars& extra_env, std::chrono::milliseconds timeout) {
  CliResult result;
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return result;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return result;
  }
  std::string error;
  pid_t pid = SpawnBinary(args, extra_env, out[1], err[1], &error, binary);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    result.err = error;
    return result;
  }
  auto deadline = SteadyClock::now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    int left = MillisLeft(deadline);
    if (left == 0) {
      result.timed_out = true;
      break;
    }
    int n = poll(fds, 2, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;  // the loop ends on the deadline
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char chunk[4096];
      ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        sinks[i]->append(chunk, static_cast<size_t>(got));
      }
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = -1;
  if (!result.timed_out) {
    // Both pipes closed: the child is exiting; wait for it until the deadline.
    while (true) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) {
        status = -1;
        break;
      }
      if (MillisLeft(deadline) == 0) {
        result.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (result.timed_out) status = KillAndReap(pid, std::chrono::milliseconds(0), false);
  result.exit_code = status < 0 ? -1 : ExitCode(status);
  return result;
}

}  // namespace

CliResult RunCli(const std::vector<std::string>& args, const EnvVars& extra_env,
                 std::chrono::milliseconds timeout) {
  return RunBinary(BinaryPath(), args, extra_env, timeout);
}

CliResult RunBench(const std::vector<std::string>& args, const EnvVars& extra_env,
                   std::chrono::milliseconds timeout) {
  return RunBinary(BenchBinaryPath(), args, extra_env, timeout);
}

// ---- raw TCP -------------------------------------------------------------------------------

int ConnectLoopback(uint16_t port, std::chrono::milliseconds timeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int r = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (r != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (poll(&p, 1, static_cast<int>(timeout.count())) == 1 &&
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
      r = 0;
    }
  }
  if (r != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

RawConnection::RawConnection(uint16_t port, std::chrono::milliseconds timeout) {
  fd_ = ConnectLoopback(port, timeout);
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RawConnection::Send(std::string_view bytes) {
  auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  while (!bytes.empty()) {
    if (fd_ < 0 || closed_) return false;
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      // The server may answer before it has read everything (413, 503): keep what it says,
      // and stop sending once it has closed, as a browser or curl does.
      pollfd p{fd_, POLLIN | POLLOUT, 0};
      if (poll(&p, 1, MillisLeft(deadline)) <= 0) return false;
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        char chunk[8192];
        ssize_t got = recv(fd_, chunk, sizeof chunk, 0);
        if (got > 0) {
          buffer_.append(chunk, static_cast<size_t>(got));
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          closed_ = true;
          return false;
        }
      }
      continue;
    }
    return false;  // reset: what the server said before it is still in buffer_
  }
  return true;
}

void RawConnection::ShutdownWrite() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

bool RawConnection::Fill(SteadyClock::time_point deadline) {
  if (fd_ < 0 || closed_) return false;
  while (true) {
    int left = MillisLeft(deadline);
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, left);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;  // timeout
    char chunk[8192];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {  // closed (or reset)
      closed_ = true;
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

std::string RawConnection::ReadResponse(std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(deadline)) {
      std::string partial = std::move(buffer_);
      buffer_.clear();
      return partial;
    }
  }
  head_end += 4;
  std::string head = buffer_.substr(0, head_end);
  std::string lower = head;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  size_t length = 0;
  if (size_t at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
    length = std::strtoul(lower.c_str() + at + 17, nullptr, 10);
  }
  while (buffer_.size() < head_end + length) {
    if (!Fill(deadline)) break;
  }
  size_t take = std::min(buffer_.size(), head_end + length);
  std::string response = buffer_.substr(0, take);
  buffer_.erase(0, take);
  return response;
}

bool RawConnection::ReadUntilClosed(std::string& data, std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (Fill(deadline)) {
  }
  data += buffer_;
  buffer_.clear();
  return closed_;
}

std::string RawExchange(uint16_t port, std::string_view bytes, std::chrono::milliseconds timeout) {
  RawConnection conn(port);
  if (!conn.connected()) return {};
  conn.Send(bytes);
  std::string data;
  conn.ReadUntilClosed(data, timeout);
  return data;
}

int RawStatus(std::string_view response) {
  if (response.size() < 12 || response.substr(0, 7) != "HTTP/1.") return 0;
  std::string_view code = response.substr(9, 3);
  if (!std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  return (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
}

std::optional<std::string> RawHeader(std::string_view response, std::string_view name) {
  size_t head_end = response.find("\r\n\r\n");
  std::string_view head = response.substr(0, head_end);
  size_t line_start = head.find("\r\n");
  while (line_start != std::string_view::npos) {
    line_start += 2;
    size_t line_end = head.find("\r\n", line_start);
    std::string_view line =
        head.substr(line_start, line_end == std::string_view::npos ? std::string_view::npos
                                                                   : line_end - line_start);
    size_t colon = line.find(':');
    if (colon != std::string_view::npos && colon == name.size() &&
        std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
      return std::string(value);
    }
    line_start = line_end;
  }
  return std::nullopt;
}

std::string RawBody(std::string_view response) {
  size_t head_end = response.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return {};
  return std::string(response.substr(head_end + 4));
}

std::string RawRequest(std::string_view method, std::string_view target, std::string_view body,
                       const std::vector<std::string>& headers) {
  std::string out;
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (const std::string& h : headers) out.append(h).append("\r\n");
  if (!body.empty() || method == "POST" || method == "PUT") {
    out.append("Content-Type: application/json\r\nContent-Length: ")
        .append(std::to_string(body.size()))
        .append("\r\n");
  }
  out.append("\r\n").append(body);
  return out;
}

}  // namespace anteroom::testing
