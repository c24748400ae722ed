#include "support/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include "support/temp_dir.h"

namespace anteroom::testing {

namespace fs = std::filesystem;

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

std::vector<pid_t> ChildPids() {
  std::vector<pid_t> out;
  pid_t self = getpid();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile(entry.path() / "stat");
    size_t close_paren = stat.rfind(')');  // the command name may hold anything
    if (close_paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close_paren + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid == self) out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

// ---- OrphanReaper ------------------------------------------------------------------------

OrphanReaper::OrphanReaper() { enabled_ = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

OrphanReaper::~OrphanReaper() {
  KillRunning();
  if (enabled_) prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
}

size_t OrphanReaper::Reap(milliseconds timeout, std::vector<pid_t>* left) {
  size_t reaped = 0;
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    std::vector<pid_t> running;
    for (pid_t pid : ChildPids()) {
      if (keep_.count(pid) != 0) continue;
      int status = 0;
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        ++reaped;
      } else if (r == 0) {
        running.push_back(pid);
      }
    }
    if (running.empty() || SteadyClock::now() >= deadline) {
      if (left != nullptr) *left = running;
      return reaped;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

std::vector<pid_t> OrphanReaper::KillRunning() {
  std::vector<pid_t> running;
  Reap(milliseconds(0), &running);
  for (pid_t pid : running) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return running;
}

// ---- WorkerProcess -----------------------------------------------------------------------

WorkerProcess::WorkerProcess(std::vector<std::string> args, const EnvVars& extra_env,
                             fs::path output)
    : output_(std::move(output)) {
  int out_fd = open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    error_ = "open " + output_.string() + ": " + std::strerror(errno);
    return;
  }
  pid_ = SpawnBinary(std::move(args), extra_env, out_fd, out_fd, &error_);
  close(out_fd);
}

std::string WorkerProcess::Output() const { return "\nworker output:\n" + Tail(ReadFile(output_)); }

bool WorkerProcess::Alive() {
  if (pid_ <= 0 || reaped_) return false;
  pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return r == 0;
}

void WorkerProcess::Signal(int sig) {
  if (Alive()) kill(pid_, sig);
}

std::optional<int> WorkerProcess::WaitExit(milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (Alive()) {
    if (SteadyClock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return status_;
}

int WorkerProcess::Kill() {
  if (!Alive()) return status_;
  kill(pid_, SIGKILL);
  while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status_;
}

int WorkerProcess::Stop(milliseconds grace) {
  if (!Alive()) return status_;
  kill(pid_, SIGTERM);
  if (std::optional<int> status = WaitExit(grace)) return *status;
  return Kill();
}

}  // namespace anteroom::testing
