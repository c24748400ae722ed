#include "support/redis_process.h"
#include "support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <thread>

extern char** environ;

namespace anteroom::testing {

namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int MillisLeft(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// fork + execve of argv[0] (an absolute path) with stdin from /dev/null and stdout/stderr to
// out_fd (or /dev/null when out_fd < 0); every other descriptor is closed in the child, so it
// holds none of the test's sockets or pipes. The child gets SIGKILL when the forking thread
// exits. Only async-signal-safe calls between fork and exec.
pid_t SpawnProgram(std::vector<std::string> args, int out_fd, std::string* error) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> argv = CStrings(args);
  std::vector<char*> envp = CStrings(env);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      if (out_fd < 0) {
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
      }
    }
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    }
    syscall(SYS_close_range, 3U, ~0U, 0U);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// SIGTERM (unless skipped), bounded wait, SIGKILL, blocking reap. The wait status, -1 if the
// child was not ours to reap.
int KillAndReap(pid_t pid, milliseconds grace, bool term_first) {
  int status = 0;
  if (term_first) {
    kill(pid, SIGTERM);
    auto deadline = SteadyClock::now() + grace;
    while (SteadyClock::now() < deadline) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) return status;
      if (r < 0 && errno != EINTR) return -1;
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

bool BindLoopback(int fd, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

// Is nobody bound to 127.0.0.1:port (nor to the wildcard address)?
bool PortFree(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool ok = BindLoopback(fd, port);
  close(fd);
  return ok;
}

void Render(const RespReply& r, std::string& out) {
  switch (r.type) {
    case RespReply::Type::kString:
    case RespReply::Type::kStatus:
    case RespReply::Type::kError:
      out += r.str;
      out += '\n';
      break;
    case RespReply::Type::kInteger:
      out += std::to_string(r.integer);
      out += '\n';
      break;
    case RespReply::Type::kNil:
      out += '\n';
      break;
    case RespReply::Type::kArray:
      for (const RespReply& e : r.elements) Render(e, out);
      break;
  }
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

bool RedisAvailable() {
  return access(kRedisServerPath, X_OK) == 0 && access(kRedisCliPath, X_OK) == 0;
}

uint16_t FreeLoopbackPort(bool cluster_bus) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    if (!BindLoopback(fd, 0)) {
      close(fd);
      return 0;
    }
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    uint16_t port = 0;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) port = ntohs(addr.sin_port);
    close(fd);
    if (port == 0) continue;
    if (!cluster_bus) return port;
    if (port + 10000 > 65535) continue;
    if (PortFree(static_cast<uint16_t>(port + 10000))) return port;
  }
  return 0;
}

// ---- RespReply / RespConnection --------------------------------------------------------------

std::string RespReply::Text() const {
  std::string out;
  Render(*this, out);
  return out;
}

RespConnection::RespConnection(uint16_t port, milliseconds timeout) {
  fd_ = ConnectLoopback(port, timeout);
}

RespConnection::~RespConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RespConnection::Fill(SteadyClock::time_point deadline) {
  if (fd_ < 0) return false;
  if (read_at_ > 0 && read_at_ == buffer_.size()) {
    buffer_.clear();
    read_at_ = 0;
  }
  while (true) {
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char chunk[16384];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

std::optional<std::string> RespConnection::Line(SteadyClock::time_point deadline) {
  while (true) {
    size_t end = buffer_.find("\r\n", read_at_);
    if (end != std::string::npos) {
      std::string line = buffer_.substr(read_at_, end - read_at_);
      read_at_ = end + 2;
      return line;
    }
    if (!Fill(deadline)) return std::nullopt;
  }
}

std::optional<RespReply> RespConnection::Parse(SteadyClock::time_point deadline, int depth) {
  if (depth > 16) return std::nullopt;
  auto line = Line(deadline);
  if (!line || line->empty()) return std::nullopt;
  RespReply r;
  char kind = (*line)[0];
  std::string rest = line->substr(1);
  switch (kind) {
    case '+':
      r.type = RespReply::Type::kStatus;
      r.str = rest;
      return r;
    case '-':
      r.type = RespReply::Type::kError;
      r.str = rest;
      return r;
    case ':':
      r.type = RespReply::Type::kInteger;
      r.integer = std::strtoll(rest.c_str(), nullptr, 10);
      return r;
    case '$': {
      int64_t len = std::strtoll(rest.c_str(), nullptr, 10);
      if (len < 0) return r;  // nil
      while (buffer_.size() - read_at_ < static_cast<size_t>(len) + 2) {
        if (!Fill(deadline)) return std::nullopt;
      }
      r.type = RespReply::Type::kString;
      r.str = buffer_.substr(read_at_, static_cast<size_t>(len));
      read_at_ += static_cast<size_t>(len) + 2;
      return r;
    }
    case '*': {
      int64_t n = std::strtoll(rest.c_str(), nullptr, 10);
      if (n < 0) return r;  // nil array
      r.type = RespReply::Type::kArray;
      for (int64_t i = 0; i < n; ++i) {
        auto e = Parse(deadline, depth + 1);
        if (!e) return std::nullopt;
        r.elements.push_back(std::move(*e));
      }
      return r;
    }
    default:
      return std::nullopt;
  }
}

std::optional<RespReply> RespConnection::Call(const std::vector<std::string>& args,
                                              milliseconds timeout) {
  if (fd_ < 0) return std::nullopt;
  auto deadline = SteadyClock::now() + timeout;
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
  std::string_view rest = out;
  while (!rest.empty()) {
    ssize_t n = send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) {
      rest.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, MillisLeft(deadline)) > 0) continue;
    }
    close(fd_);
    fd_ = -1;
    return std::nullopt;
  }
  auto reply = Parse(deadline, 0);
  if (!reply) {
    close(fd_);
    fd_ = -1;
  }
  return reply;
}

// ---- RunProgram --------------------------------------------------------------------------------

ProgramResult RunProgram(const std::vector<std::string>& argv, milliseconds timeout) {
  ProgramResult result;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return result;
  std::string error;
  pid_t pid = SpawnProgram(argv, out[1], &error);
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    result.out = error;
    return result;
  }
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    int left = MillisLeft(deadline);
    if (left == 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    int n = poll(&p, 1, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char chunk[4096];
    ssize_t got = read(out[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    result.out.append(chunk, static_cast<size_t>(got));
  }
  close(out[0]);
  int status = -1;
  if (!result.timed_out) {
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
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
  if (result.timed_out) status = KillAndReap(pid, milliseconds(0), false);
  if (status >= 0) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

// ---- RedisProcess ------------------------------------------------------------------------------

RedisProcess::~RedisProcess() { Stop(); }

std::string RedisProcess::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

std::string RedisProcess::Log() const {
  if (!dir_) return {};
  return Tail(ReadFile(dir_->path() / "redis.log"), 4000);
}

bool RedisProcess::Start(std::vector<std::string> extra_args, bool cluster_bus,
                         milliseconds timeout) {
  Stop();
  error_.clear();
  if (!RedisAvailable()) {
    error_ = std::string(kRedisServerPath) + " or " + kRedisCliPath + " is not installed";
    return false;
  }
  dir_ = std::make_unique<TempDir>("anteroom-redis");
  if (dir_->path().empty()) {
    error_ = std::string("cannot make a temp dir: ") + std::strerror(errno);
    return false;
  }
  args_ = std::move(extra_args);
  std::string last_error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = FreeLoopbackPort(cluster_bus);
    if (port_ == 0) {
      error_ = "no free loopback port";
      return false;
    }
    if (Spawn(timeout)) return true;
    last_error = error_;
    // A port taken by someone else between our probe and redis-server's bind: another one.
  }
  error_ = "redis-server did not start after 5 attempts; last: " + last_error;
  return false;
}

bool RedisProcess::Spawn(milliseconds timeout) {
  error_.clear();
  conn_.reset();
  std::vector<std::string> argv = {kRedisServerPath,
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   dir_->path().string(),
                                   "--logfile",
                                   (dir_->path() / "redis.log").string(),
                                   "--daemonize",
                                   "no",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  std::string error;
  pid_ = SpawnProgram(argv, -1, &error);
  if (pid_ < 0) {
    error_ = error;
    return false;
  }
  reaped_ = false;
  auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    if (!Alive()) {
      error_ = "redis-server exited at start (port " + std::to_string(port_) + "); log:\n" + Log();
      return false;
    }
    if (Ping(milliseconds(500))) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  error_ = "redis-server did not answer PING within " + std::to_string(timeout.count()) +
           " ms; log:\n" + Log();
  Stop();
  return false;
}

bool RedisProcess::Restart(milliseconds down_for, milliseconds grace) {
  Stop(grace);
  if (down_for.count() > 0) std::this_thread::sleep_for(down_for);
  return StartAgain();
}

bool RedisProcess::StartAgain(milliseconds timeout) {
  if (!dir_ || port_ == 0) {
    error_ = "StartAgain before Start";
    return false;
  }
  Stop();
  // Our own listening socket is gone; give the port a few tries in case it lingers.
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (Spawn(std::max<milliseconds>(milliseconds(100), std::chrono::duration_cast<milliseconds>(
                                                            deadline - SteadyClock::now())))) {
      return true;
    }
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

bool RedisProcess::Alive() {
  if (pid_ < 0 || reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    reaped_ = true;
    return false;
  }
  return true;
}

void RedisProcess::Kill() {
  conn_.reset();
  if (pid_ > 0 && Alive()) KillAndReap(pid_, milliseconds(0), /*term_first=*/false);
  reaped_ = true;
}

int RedisProcess::Stop(milliseconds grace) {
  conn_.reset();
  int status = -1;
  if (pid_ > 0 && Alive()) {
    kill(pid_, SIGCONT);  // a frozen server must see the SIGTERM
    status = KillAndReap(pid_, grace, /*term_first=*/true);
  }
  reaped_ = true;
  return status;
}

void RedisProcess::Freeze() {
  if (pid_ > 0 && Alive()) kill(pid_, SIGSTOP);
}

void RedisProcess::Thaw() {
  if (pid_ > 0 && Alive()) kill(pid_, SIGCONT);
}

bool RedisProcess::Ping(milliseconds timeout) {
  if (port_ == 0) return false;
  RespConnection conn(port_, timeout);
  if (!conn.connected()) return false;
  auto r = conn.Call({"PING"}, timeout);
  return r && r->type == RespReply::Type::kStatus && r->str == "PONG";
}

std::optional<RespReply> RedisProcess::Call(const std::vector<std::string>& args,
                                            milliseconds timeout) {
  if (port_ == 0) return std::nullopt;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!conn_ || !conn_->connected()) {
      conn_ = std::make_unique<RespConnection>(port_,
                                               std::min<milliseconds>(timeout, milliseconds(5000)));
      if (!conn_->connected()) {
        conn_.reset();
        return std::nullopt;
      }
    }
    auto r = conn_->Call(args, timeout);
    if (r) return r;
    conn_.reset();  // perhaps a connection the server closed: once more on a new one
  }
  return std::nullopt;
}

std::string RedisProcess::Command(const std::vector<std::string>& args, milliseconds timeout) {
  auto r = Call(args, timeout);
  return r ? r->Text() : std::string();
}

// ---- RedisCluster ------------------------------------------------------------------------------

RedisCluster::~RedisCluster() { Stop(); }

void RedisCluster::Stop() {
  for (auto& n : nodes_) n->Stop();
}

uint16_t RedisCluster::ClusterPort(size_t i) const {
  return tls_ ? tls_ports_.at(i) : nodes_.at(i)->port();
}

std::string RedisCluster::url() const {
  std::string out = tls_ ? "rediss+cluster://" : "redis+cluster://";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i > 0) out += ",";
    out += "127.0.0.1:" + std::to_string(ClusterPort(i));
  }
  return out;
}

bool RedisCluster::Start(milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  error_.clear();
  nodes_.clear();
  tls_ports_.clear();
  ids_.clear();
  for (int i = 0; i < kMasters; ++i) {
    std::vector<std::string> args = {"--cluster-enabled",
                                     "yes",
                                     "--cluster-config-file",
                                     "nodes.conf",
                                     "--cluster-node-timeout",
                                     "5000",
                                     "--appendonly",
                                     "no",
                                     "--save",
                                     ""};
    if (tls_) {
      uint16_t tls_port = FreeLoopbackPort(/*cluster_bus=*/true);  // its bus: + 10000
      if (tls_port == 0) {
        error_ = "no free TLS port";
        return false;
      }
      tls_ports_.push_back(tls_port);
      args.insert(args.end(), {"--tls-port", std::to_string(tls_port), "--tls-cluster", "yes",
                               "--tls-cert-file", tls_->cert_file, "--tls-key-file", tls_->key_file,
                               "--tls-ca-cert-file", tls_->ca_file, "--tls-auth-clients", "no"});
    }
    auto node = std::make_unique<RedisProcess>();
    if (!node->Start(args, /*cluster_bus=*/true)) {
      error_ = "node " + std::to_string(i) + ": " + node->error();
      return false;
    }
    nodes_.push_back(std::move(node));
  }
  std::vector<std::string> create = {kRedisCliPath, "--cluster", "create"};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    create.push_back("127.0.0.1:" + std::to_string(ClusterPort(i)));
  }
  create.insert(create.end(), {"--cluster-replicas", "0", "--cluster-yes"});
  if (tls_) create.insert(create.end(), {"--tls", "--cacert", tls_->ca_file});
  ProgramResult made = RunProgram(
      create, std::max<milliseconds>(milliseconds(1000), std::chrono::duration_cast<milliseconds>(
                                                             deadline - SteadyClock::now())));
  if (made.timed_out || made.exit_code != 0) {
    error_ = "redis-cli --cluster create failed (exit " + std::to_string(made.exit_code) +
             (made.timed_out ? ", timed out" : "") + "):\n" + made.out;
    return false;
  }
  for (auto& n : nodes_) {
    std::string id = Trimmed(n->Command({"CLUSTER", "MYID"}));
    if (id.size() != 40) {
      error_ = "CLUSTER MYID answered: " + id;
      return false;
    }
    ids_.push_back(id);
  }
  // Every node: state ok, every slot assigned, every master known, and the same owner for a few
  // sample slots on every node.
  while (true) {
    bool ok = true;
    std::string last;
    for (auto& n : nodes_) {
      std::string info = n->Command({"CLUSTER", "INFO"});
      if (info.find("cluster_state:ok") == std::string::npos ||
          info.find("cluster_slots_assigned:16384") == std::string::npos ||
          info.find("cluster_known_nodes:3") == std::string::npos) {
        ok = false;
        last = info;
        break;
      }
    }
    if (ok) {
      for (int slot : {0, 5000, 10000, 16383}) {
        int owner = NodeOfSlot(slot);
        if (owner < 0 || NodesAgreeing(slot, owner) != kMasters) {
          ok = false;
          last = "nodes disagree on slot " + std::to_string(slot);
          break;
        }
      }
    }
    if (ok) return true;
    if (SteadyClock::now() >= deadline) {
      error_ = "the cluster did not become ok in time; last:\n" + last;
      return false;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

int RedisCluster::SlotOf(const std::string& key) {
  if (nodes_.empty()) return -1;
  auto r = nodes_[0]->Call({"CLUSTER", "KEYSLOT", key});
  if (!r || r->type != RespReply::Type::kInteger) return -1;
  return static_cast<int>(r->integer);
}

namespace {
// The owner of `slot` in one node's CLUSTER SLOTS answer, as a port; 0 when not found.
uint16_t OwnerPort(const RespReply& slots, int slot) {
  if (slots.type != RespReply::Type::kArray) return 0;
  for (const RespReply& range : slots.elements) {
    if (range.type != RespReply::Type::kArray || range.elements.size() < 3) continue;
    int64_t lo = range.elements[0].integer;
    int64_t hi = range.elements[1].integer;
    if (slot < lo || slot > hi) continue;
    const RespReply& master = range.elements[2];
    if (master.type != RespReply::Type::kArray || master.elements.size() < 2) return 0;
    return static_cast<uint16_t>(master.elements[1].integer);
  }
  return 0;
}
}  // namespace

int RedisCluster::NodeOfSlot(int slot) {
  std::map<int, int> votes;
  for (auto& n : nodes_) {
    auto r = n->Call({"CLUSTER", "SLOTS"});
    if (!r) continue;
    uint16_t port = OwnerPort(*r, slot);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->port() == port) ++votes[static_cast<int>(i)];
    }
  }
  int best = -1;
  int best_votes = 0;
  for (auto [node, count] : votes) {
    if (count > best_votes) {
      best = node;
      best_votes = count;
    }
  }
  return best;
}

int RedisCluster::NodesAgreeing(int slot, int owner) {
  if (owner < 0 || owner >= static_cast<int>(nodes_.size())) return 0;
  int agree = 0;
  for (auto& n : nodes_) {
    auto r = n->Call({"CLUSTER", "SLOTS"});
    if (r && OwnerPort(*r, slot) == nodes_[static_cast<size_t>(owner)]->port()) ++agree;
  }
  return agree;
}

int64_t RedisCluster::KeysInSlot(int node, int slot) {
  auto r = nodes_.at(static_cast<size_t>(node))
               ->Call({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
  if (!r || r->type != RespReply::Type::kInteger) return -1;
  return r->integer;
}

bool RedisCluster::MigrateSlot(int slot, int to, const MigrateOptions& options) {
  error_.clear();
  last_migrated_keys_ = 0;
  auto deadline = SteadyClock::now() + options.timeout;
  auto step = [&](const std::string& name) {
    if (options.on_step) options.on_step(name);
  };
  if (slot < 0 || slot > 16383 || to < 0 || to >= static_cast<int>(nodes_.size())) {
    error_ = "bad slot or node";
    return false;
  }
  int from = NodeOfSlot(slot);
  if (from < 0) {
    error_ = "no node serves slot " + std::to_string(slot);
    return false;
  }
  if (from == to) return true;
  RedisProcess& src = *nodes_[static_cast<size_t>(from)];
  RedisProcess& dst = *nodes_[static_cast<size_t>(to)];
  const std::string slot_text = std::to_string(slot);
  auto must_ok = [&](RedisProcess& node, const std::vector<std::string>& args) {
    auto r = node.Call(args);
    if (r && r->type == RespReply::Type::kStatus && r->str == "OK") return true;
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    error_ = "`" + cmd + "` on port " + std::to_string(node.port()) +
             " answered: " + (r ? r->Text() : std::string("(no answer)"));
    return false;
  };

  if (!must_ok(dst,
               {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", ids_[static_cast<size_t>(from)]}))
    return false;
  if (!must_ok(src, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", ids_[static_cast<size_t>(to)]}))
    return false;
  step("marked");
  if (options.pause_after_marking.count() > 0) {
    std::this_thread::sleep_for(options.pause_after_marking);
  }

  while (true) {
    if (SteadyClock::now() >= deadline) {
      error_ = "slot " + slot_text + " not emptied in time";
      return false;
    }
    auto keys = src.Call({"CLUSTER", "GETKEYSINSLOT", slot_text, std::to_string(options.batch)});
    if (!keys || keys->type != RespReply::Type::kArray) {
      error_ = "CLUSTER GETKEYSINSLOT answered: " + (keys ? keys->Text() : "(no answer)");
      return false;
    }
    if (keys->elements.empty()) break;
    std::vector<std::string> migrate = {
        "MIGRATE", "127.0.0.1", std::to_string(ClusterPort(static_cast<size_t>(to))), "", "0",
        "5000",    "KEYS"};
    for (const RespReply& k : keys->elements) migrate.push_back(k.str);
    auto r = src.Call(migrate);
    if (!r || r->is_error()) {
      error_ = "MIGRATE answered: " + (r ? r->Text() : std::string("(no answer)"));
      return false;
    }
    // OK, or NOKEY when every key expired or was deleted meanwhile.
    last_migrated_keys_ += static_cast<int64_t>(keys->elements.size());
    step("batch");
    if (options.pause_between_batches.count() > 0) {
      std::this_thread::sleep_for(options.pause_between_batches);
    }
  }
  step("moved");
  if (options.pause_before_handover.count() > 0) {
    std::this_thread::sleep_for(options.pause_before_handover);
  }

  const std::string& dst_id = ids_[static_cast<size_t>(to)];
  if (!must_ok(dst, {"CLUSTER", "SETSLOT", slot_text, "NODE", dst_id})) return false;
  if (!must_ok(src, {"CLUSTER", "SETSLOT", slot_text, "NODE", dst_id})) return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (static_cast<int>(i) == from || static_cast<int>(i) == to) continue;
    if (!must_ok(*nodes_[i], {"CLUSTER", "SETSLOT", slot_text, "NODE", dst_id})) return false;
  }
  step("handed_over");
  while (NodesAgreeing(slot, to) != static_cast<int>(nodes_.size())) {
    if (SteadyClock::now() >= deadline) {
      error_ = "the nodes did not agree on the new owner of slot " + slot_text + " in time";
      return false;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

}  // namespace anteroom::testing
