// `anteroom work Q [--concurrency N] -- CMD ARGS...`: a worker. Each of N loops long-polls for
// a job, runs CMD with the payload on stdin, acks on exit 0 and nacks with the tail of CMD's
// stderr otherwise, extending the lease while CMD runs. A heartbeat keeps the worker alive
// faster than the lease. SIGINT/SIGTERM: stop fetching, finish the jobs in hand, exit; a second
// signal stops the commands and hands their jobs back (nack, delay 0).
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
#include "cmd/commands.h"
#include "server/payload_text.h"

extern char** environ;

namespace anteroom::cmd {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::atomic<int> g_signals{0};
extern "C" void OnStopSignal(int) { g_signals.fetch_add(1); }

struct WorkFlags {
  std::string queue;
  std::vector<std::string> command;
  int concurrency = 1;
  std::string worker;
  int64_t lease_ms = 30'000;
  int64_t heartbeat_ms = 10'000;
  int64_t wait_ms = 1'000;  // an idle loop notices a stop signal within this
};

struct Outcome {
  bool ok = false;
  bool abandoned = false;  // stopped by a second signal: hand the job back
  std::string error;
};

constexpr size_t kStderrTail = 2048;

// Runs the command with `payload` on stdin in its own process group (a terminal's Ctrl-C then
// reaches only the worker, which lets the command finish). `tick` is called about every 200 ms.
Outcome RunCommand(const std::vector<std::string>& command, const std::string& payload,
                   const std::function<void()>& tick) {
  int in_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return {false, false, "pipe failed"};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return {false, false, "pipe failed"};
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
    return {false, false, fmt::format("cannot run {}: {}", command[0], std::strerror(rc))};
  }

  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  // Readable when the command exits, so the loop wakes at once instead of on its next tick.
  int exit_fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  int in_fd = in_pipe[1];
  int err_fd = err_pipe[0];
  size_t written = 0;
  std::string tail;
  bool signalled = false;
  int status = 0;
  auto last_tick = SteadyClock::now();
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
    if (g_signals.load() >= 2 && !signalled) {
      kill(-pid, SIGTERM);
      signalled = true;
    }
    if (SteadyClock::now() - last_tick > std::chrono::milliseconds(200)) {
      tick();
      last_tick = SteadyClock::now();
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
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {true, false, ""};
  std::string why = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                      : fmt::format("killed by signal {}", WTERMSIG(status));
  return {false, signalled, tail.empty() ? why : why + ": " + tail};
}

// Logs the outcome of acking job `id`, from an ack answer's item.
void LogAck(const std::string& id, const boost::json::value* item) {
  bool ok =
      item && item->is_object() && item->as_object().if_contains("ok") && item->at("ok") == true;
  if (ok) return spdlog::info("job {}: acked", id);
  spdlog::warn("job {}: done, but the server did not take the ack: {}", id,
               item ? boost::json::serialize(*item) : "no answer");
}

void WorkLoop(const WorkFlags& f, const ClientFlags& cf, int index) {
  Client client(cf.server, cf.DataKey());
  // The last finished job's ack rides on the next fetch: one request per job.
  std::optional<std::pair<std::string, std::string>> to_ack;  // lease, job id
  while (g_signals.load() == 0) {
    std::vector<std::string> ack;
    if (to_ack) ack.push_back(to_ack->first);
    HttpResult r = client.Fetch(f.queue, f.worker, 1, f.lease_ms, f.wait_ms, ack);
    if (!r.ok() || !r.json.is_object()) {
      spdlog::warn("loop {}: fetch failed: {} {}", index, r.error, r.body);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;  // acks are idempotent: the pending one is simply sent again
    }
    if (to_ack) {
      const auto* acked = r.json.as_object().if_contains("acked");
      LogAck(to_ack->second, acked && acked->is_array() && !acked->as_array().empty()
                                 ? &acked->as_array()[0]
                                 : nullptr);
      to_ack.reset();
    }
    // The payloads as the server sent them (parsed, a number could lose digits).
    server::PayloadTexts payloads(r.body, /*batch=*/true);
    const boost::json::array& jobs = r.json.at("jobs").as_array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const boost::json::value& job = jobs[i];
      std::string lease(job.at("lease").as_string());
      std::string id(job.at("id").as_string());
      if (g_signals.load() > 0) {  // arrived after the stop signal: not ours to finish
        client.Nack(f.queue, {lease}, 0, "worker shut down before starting the job");
        spdlog::info("job {}: handed back", id);
        continue;
      }
      auto text = payloads.Of(job.at("payload"), i);
      std::string payload =
          text.ok() ? std::move(*text) : boost::json::serialize(job.at("payload"));
      auto extended = SteadyClock::now();
      Outcome out = RunCommand(f.command, payload, [&] {
        // Extend at a third of the lease, so one lost request does not lose the job.
        if (SteadyClock::now() - extended < std::chrono::milliseconds(f.lease_ms / 3)) return;
        client.Extend(f.queue, {lease}, f.lease_ms);
        extended = SteadyClock::now();
      });
      if (out.ok) {
        to_ack.emplace(std::move(lease), std::move(id));
        continue;
      }
      HttpResult answer = out.abandoned ? client.Nack(f.queue, {lease}, 0, "worker shut down")
                                        : client.Nack(f.queue, {lease}, {}, out.error);
      spdlog::info("job {}: nacked{}", id,
                   answer.ok() ? "" : " (the server did not take it: " + answer.body + ")");
    }
  }
  if (to_ack) {  // stopping: the last ack goes on its own
    HttpResult r = client.Ack(f.queue, {to_ack->first});
    const boost::json::value* item = nullptr;
    if (r.ok() && r.json.is_object()) {
      const auto* results = r.json.as_object().if_contains("results");
      if (results && results->is_array() && !results->as_array().empty())
        item = &results->as_array()[0];
    }
    LogAck(to_ack->second, item);
  }
}

int RunWork(WorkFlags f, const ClientFlags& cf) {
  if (f.worker.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    f.worker = fmt::format("{}-{}", host, getpid());
  }
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

  std::atomic<bool> done{false};
  std::thread heartbeat([&] {
    Client client(cf.server, cf.DataKey());
    std::string path = "/v1/queues/" + Client::Segment(f.queue) + "/workers/" +
                       Client::Segment(f.worker) + "/heartbeat";
    std::string body = fmt::format(R"({{"ttl_ms":{}}})", f.heartbeat_ms);
    while (!done.load()) {
      client.Request("POST", path, body);
      for (int i = 0; i < 10 && !done.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(f.heartbeat_ms / 30 + 1));
      }
    }
  });
  std::vector<std::thread> loops;
  for (int i = 0; i < f.concurrency; ++i) loops.emplace_back([&, i] { WorkLoop(f, cf, i); });
  for (auto& t : loops) t.join();
  done = true;
  heartbeat.join();
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
  work->add_option("--server", flags.server, "anteroom server URL")->capture_default_str();
  work->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  work->add_option("--queue-key", flags.queue_key,
                   "Queue key, sent instead of the admin key (default: $ANTEROOM_QUEUE_KEY)");
  work->callback([f, &flags] {
    int rc = RunWork(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::cmd
