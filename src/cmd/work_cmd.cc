// `anteroom work Q [--concurrency N] -- CMD ARGS...`: a worker (anteroom::Worker) running CMD
// per job with the payload on stdin: acked on exit 0, nacked with the tail of CMD's stderr
// otherwise; leases are extended while CMD runs and a heartbeat keeps the worker alive faster
// than the lease. SIGINT/SIGTERM: stop fetching, let the running commands finish within
// --shutdown-grace-ms, then stop those left and hand their jobs back (nack, delay 0); a second
// signal ends the grace at once. Exit 0.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "anteroom/worker.hpp"
#include "cmd/commands.h"
#include "server/payload_text.h"

extern char** environ;

namespace anteroom::cmd {

namespace {

using SteadyClock = std::chrono::steady_clock;

// The first SIGINT/SIGTERM starts the drain, the second ends its grace. Both calls are
// async-signal-safe.
std::atomic<Worker*> g_worker{nullptr};
std::atomic<int> g_signals{0};
std::atomic<int64_t> g_grace_ms{0};
extern "C" void OnStopSignal(int) {
  int n = g_signals.fetch_add(1) + 1;
  Worker* w = g_worker.load();
  if (w == nullptr) return;
  if (n == 1) {
    w->RequestStop();
  } else {
    w->StopNow();
  }
}

struct WorkFlags {
  std::string queue;
  std::vector<std::string> command;
  int concurrency = 1;
  std::string worker;
  int64_t lease_ms = 30'000;
  int64_t heartbeat_ms = 10'000;
  int64_t shutdown_grace_ms = 25'000;
  int64_t wait_ms = 30'000;  // a stop cuts a parked long poll short: no need to keep it short
  bool no_reclaim = false;
};

struct Outcome {
  bool ok = false;
  std::string error;
};

constexpr size_t kStderrTail = 2048;

// How long a command stopped with SIGTERM has before SIGKILL.
constexpr auto kKillAfter = std::chrono::seconds(5);

// Runs the command with `payload` on stdin in its own process group (a terminal's Ctrl-C then
// reaches only the worker, which lets the command finish). Once `abandoned()` (the job was
// handed back), the command's group gets SIGTERM, and SIGKILL kKillAfter later.
Outcome RunCommand(const std::vector<std::string>& command, const std::string& payload,
                   const std::function<bool()>& abandoned) {
  int in_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return {false, "pipe failed"};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return {false, "pipe failed"};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t defaults;  // the worker ignores SIGPIPE; the command gets the usual behaviour back
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in_pipe[0]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(err_pipe[0]);
    return {false, fmt::format("cannot run {}: {}", command[0], std::strerror(rc))};
  }

  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  // Readable when the command exits, so the loop wakes at once instead of on its next tick.
  int exit_fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  int in_fd = in_pipe[1];
  int err_fd = err_pipe[0];
  size_t written = 0;
  std::string tail;
  std::optional<SteadyClock::time_point> signalled;
  bool killed = false;
  int status = 0;
  while (true) {
    if (in_fd >= 0 && written == payload.size()) {
      close(in_fd);
      in_fd = -1;
    }
    pollfd fds[3];
    nfds_t n = 0;
    if (err_fd >= 0) fds[n++] = {err_fd, POLLIN, 0};
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (exit_fd >= 0) fds[n++] = {exit_fd, POLLIN, 0};
    if (n > 0)
      poll(fds, n, 200);
    else  // no pidfd (kernel < 5.3): look again soon
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].fd == err_fd && (fds[i].revents & (POLLIN | POLLHUP))) {
        char buf[4096];
        ssize_t got = read(err_fd, buf, sizeof buf);
        if (got <= 0) {
          close(err_fd);
          err_fd = -1;
        } else {
          tail.append(buf, static_cast<size_t>(got));
          if (tail.size() > kStderrTail) tail.erase(0, tail.size() - kStderrTail);
        }
      } else if (fds[i].fd == in_fd && (fds[i].revents & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t put = write(in_fd, payload.data() + written, payload.size() - written);
        if (put > 0)
          written += static_cast<size_t>(put);
        else if (errno != EAGAIN)
          written = payload.size();  // the command closed its stdin
      }
    }
    if (!signalled && abandoned()) {
      kill(-pid, SIGTERM);
      signalled = SteadyClock::now();
    } else if (signalled && !killed && SteadyClock::now() - *signalled > kKillAfter) {
      kill(-pid, SIGKILL);
      killed = true;
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
  }
  if (exit_fd >= 0) close(exit_fd);
  if (in_fd >= 0) close(in_fd);
  if (err_fd >= 0) {  // whatever stderr is left
    char buf[4096];
    ssize_t got;
    fcntl(err_fd, F_SETFL, O_NONBLOCK);
    while ((got = read(err_fd, buf, sizeof buf)) > 0) tail.append(buf, static_cast<size_t>(got));
    if (tail.size() > kStderrTail) tail.erase(0, tail.size() - kStderrTail);
    close(err_fd);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {true, ""};
  std::string why = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                      : fmt::format("killed by signal {}", WTERMSIG(status));
  return {false, tail.empty() ? why : why + ": " + tail};
}

void LogEvent(const WorkerEvent& e) {
  using Kind = WorkerEvent::Kind;
  switch (e.kind) {
    case Kind::kAcked:
      return spdlog::info("job {}: acked", e.job_id);
    case Kind::kAckRefused:
      return spdlog::warn("job {}: done, but the server did not take the ack: {}", e.job_id,
                          e.text);
    case Kind::kNacked:
      return spdlog::info("job {}: nacked", e.job_id);
    case Kind::kReleased:
      return spdlog::info("job {}: handed back", e.job_id);
    case Kind::kLeaseLost:
      return spdlog::warn("job {}: the lease was lost ({}): it may run elsewhere", e.job_id,
                          e.text);
    case Kind::kReclaimed:
      return spdlog::info("took back {} job(s) in flight under this worker's name", e.count);
    case Kind::kReclaimUnsupported:
      return spdlog::info("the server does not reclaim jobs on start: fetching without it");
    case Kind::kRequestFailed:
      if (e.job_id.empty()) return spdlog::warn("{}", e.text);
      return spdlog::warn("job {}: {}", e.job_id, e.text);
    case Kind::kDraining:
      return spdlog::info("stopping: no more jobs; running ones have {} ms", g_grace_ms.load());
    case Kind::kStopped:
      return;
  }
}

int RunWork(WorkFlags f, const ClientFlags& cf) {
  bool named = !f.worker.empty();
  if (!named) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    f.worker = fmt::format("{}-{}", host, getpid());
  }
  WorkerOptions options;
  options.server_url = cf.server;
  options.key = cf.DataKey();
  options.tls = cf.tls;
  options.queue = f.queue;
  options.worker_id = f.worker;
  options.concurrency = f.concurrency;
  options.lease_ms = f.lease_ms;
  options.heartbeat_ms = f.heartbeat_ms;
  options.shutdown_grace_ms = f.shutdown_grace_ms;
  options.wait_ms = f.wait_ms;
  // HOST-PID names no earlier run: nothing to reclaim.
  options.reclaim_on_start = named && !f.no_reclaim;
  options.on_event = LogEvent;
  g_grace_ms = f.shutdown_grace_ms;
  const std::vector<std::string>& command = f.command;
  Worker worker(std::move(options), [&command](const Job& job) {
    // The payload as the server sent it (parsed, a number could lose digits).
    server::PayloadTexts payloads(*job.answer, /*batch=*/true);
    auto text = payloads.Of(job.payload, job.index);
    std::string payload = text.ok() ? std::move(*text) : boost::json::serialize(job.payload);
    Outcome out = RunCommand(command, payload, [&job] { return job.abandoned(); });
    return out.ok ? HandlerResult::Success() : HandlerResult::Failure(std::move(out.error));
  });

  g_worker.store(&worker);
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A command that exits without reading all of a large payload must cost a failed write
  // (EPIPE), not the worker's life.
  signal(SIGPIPE, SIG_IGN);
  spdlog::info("worker {} on queue {}: {} loop(s) running '{}'", f.worker, f.queue, f.concurrency,
               fmt::join(f.command, " "));
  worker.Run();
  // Drained. What may be left is an abandoned command, stopped within kKillAfter while the
  // worker is destroyed; a signal now ends the process.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  g_worker.store(nullptr);
  spdlog::info("worker {} stopped", f.worker);
  return 0;
}

}  // namespace

void AddWorkCommand(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<WorkFlags>();
  CLI::App* work = app.add_subcommand(
      "work", "Run a command for each job of a queue: anteroom work Q -- CMD ARGS...");
  work->add_option("queue", f->queue, "Queue name")->required();
  work->add_option("command", f->command, "The command (after --); the payload is its stdin")
      ->required();
  work->add_option("--concurrency", f->concurrency, "Jobs run at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  work->add_option("--worker", f->worker, "Worker name (default: HOST-PID)");
  work->add_option("--lease-ms", f->lease_ms, "Lease per delivery; extended while running")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{300}, int64_t{43'200'000}));
  work->add_option("--heartbeat-ms", f->heartbeat_ms, "Heartbeat ttl")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{300}, int64_t{3'600'000}));
  work->add_option("--shutdown-grace-ms", f->shutdown_grace_ms,
                   "On SIGINT/SIGTERM, how long running commands may take before they are stopped "
                   "and their jobs handed back (a second signal: at once)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  work->add_option("--wait-ms", f->wait_ms, "Long poll of each fetch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{60'000}));
  work->add_flag("--no-reclaim", f->no_reclaim,
                 "With --worker: do not take back jobs in flight under that name at start");
  AddServerFlags(work, flags);
  work->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  work->add_option("--queue-key", flags.queue_key,
                   "Queue key, sent instead of the admin key (default: $ANTEROOM_QUEUE_KEY)");
  work->callback([f, &flags] {
    int rc = RunWork(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::cmd
