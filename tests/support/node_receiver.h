#pragma once
// The receiving end of webhook tests: `node tests/interop/webhook_receiver.mjs SECRET COUNT`, a
// Node HTTP server on 127.0.0.1 that verifies each delivery with the Standard Webhooks reference
// library and prints one JSON line per delivery. A child process stopped by its PID; every read
// of it is bounded.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"

namespace anteroom::testing {

using SteadyClock = std::chrono::steady_clock;

// `node` from PATH, or empty.
inline std::string FindNode() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) {
      std::filesystem::path candidate = std::filesystem::path(dir) / "node";
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {};
}

inline const std::filesystem::path kInterop =
    std::filesystem::path(ANTEROOM_SOURCE_DIR) / "tests/interop";

// `node webhook_receiver.mjs SECRET COUNT`, its stdout read line by line with a deadline.
class NodeReceiver {
 public:
  // `port` 0: any free one (the first line says which).
  NodeReceiver(const std::string& node, const std::string& secret, int count, int port = 0) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
      error_ = "pipe failed";
      return;
    }
    std::vector<std::string> args = {(kInterop / "webhook_receiver.mjs").string(), secret,
                                     std::to_string(count), std::to_string(port)};
    pid_ = SpawnBinary(args, {}, out[1], -1, &error_, node.c_str());
    close(out[1]);
    out_ = out[0];
  }
  ~NodeReceiver() {
    Stop();
    if (out_ >= 0) close(out_);
  }

  const std::string& error() const { return error_; }

  // The next line, or nullopt when the child closed stdout or `timeout` passed.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (true) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (left.count() <= 0 || out_ < 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // The exit status once it has exited by itself within `timeout`, else SIGKILL and nullopt.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (pid_ > 0 && SteadyClock::now() < deadline) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Stop();
    return std::nullopt;
  }

 private:
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::string error_;
};

}  // namespace anteroom::testing
