#pragma once
// Test support: `anteroom work` as a child process, and the commands it leaves behind. A worker
// runs each job as a command of its own; when the worker is killed those commands are orphaned,
// so a test that kills workers (or checks none leaves anything behind) makes itself their
// subreaper and reaps them by PID. Every wait is bounded; every process is stopped by its PID.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace anteroom::testing {

// The PIDs whose parent is this process, from /proc (zombies included).
std::vector<pid_t> ChildPids();

// Makes this process the subreaper of everything it starts, so the commands a killed worker
// leaves behind become its children: they can be counted, reaped and, if they linger, killed
// by PID. Children it must not touch (the server, running workers) are kept. Restores the old
// setting when done, after killing and reaping what is left.
class OrphanReaper {
 public:
  OrphanReaper();
  ~OrphanReaper();
  OrphanReaper(const OrphanReaper&) = delete;
  OrphanReaper& operator=(const OrphanReaper&) = delete;

  // False if prctl(PR_SET_CHILD_SUBREAPER) failed (errno tells why).
  bool enabled() const { return enabled_; }
  void Keep(pid_t pid) { keep_.insert(pid); }
  void Forget(pid_t pid) { keep_.erase(pid); }

  // Reaps children that are not kept, waiting up to `timeout` for them to exit. Answers how
  // many were reaped; those still running at the deadline are put in `left`.
  size_t Reap(std::chrono::milliseconds timeout, std::vector<pid_t>* left);
  // Reaps the children that are not kept and have exited; SIGKILLs and reaps the others, and
  // answers their PIDs (a test that expects none can report them).
  std::vector<pid_t> KillRunning();

 private:
  bool enabled_ = false;
  std::set<pid_t> keep_;
};

// One `anteroom ARGS...` process (`work ...`) with stdout and stderr going to the file `output`;
// ANTEROOM_* is cleared from the inherited environment and `extra_env` added (its commands
// inherit both). Not a pipe: a worker can run for long and write a lot, and the file is still
// there to read after it is killed. Stopped by its PID; killed and reaped when destroyed.
class WorkerProcess {
 public:
  WorkerProcess(std::vector<std::string> args, const EnvVars& extra_env,
                std::filesystem::path output);
  ~WorkerProcess() { Kill(); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  bool started() const { return pid_ > 0; }
  const std::string& error() const { return error_; }
  pid_t pid() const { return pid_; }
  // What the worker wrote (its logs), for failure messages: the tail of the output file.
  std::string Output() const;

  // True while it has not exited (reaps it if it has).
  bool Alive();
  // Sends `sig` if it is still running.
  void Signal(int sig);
  // Waits up to `timeout` for it to exit; its wait status, or nullopt if it is still running.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  // SIGKILL and reap (if it is still running); answers the wait status.
  int Kill();
  // SIGTERM, up to `grace` to exit, then SIGKILL; answers the wait status.
  int Stop(std::chrono::milliseconds grace);

 private:
  std::filesystem::path output_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  std::string error_;
};

}  // namespace anteroom::testing
