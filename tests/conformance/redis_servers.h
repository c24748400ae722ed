#pragma once
// Real redis-server processes for the conformance suite: one standalone server and one
// 3-master cluster, started on free loopback ports the first time a test asks for them and
// stopped (by PID) when the test binary exits. Every harness uses its own key prefix, so the
// tests share the servers without seeing each other's keys.

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace anteroom::store::conformance {

class RedisServers {
 public:
  static RedisServers& Get() {
    static RedisServers servers;
    return servers;
  }
  // redis://127.0.0.1:PORT of the standalone server.
  const std::string& Single() {
    if (single_.empty()) {
      int port = FreePort();
      Spawn(port, {});
      single_ = "redis://127.0.0.1:" + std::to_string(port);
    }
    return single_;
  }
  // redis+cluster://... of a 3-master cluster.
  const std::string& Cluster() {
    if (cluster_.empty()) {
      std::vector<int> ports;
      std::string create = "redis-cli --cluster create";
      for (int i = 0; i < 3; ++i) {
        ports.push_back(FreePort());
        Spawn(ports.back(), {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                             "--cluster-node-timeout", "5000"});
        create += " 127.0.0.1:" + std::to_string(ports.back());
      }
      create += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
      if (std::system(create.c_str()) != 0)
        throw std::runtime_error("redis-cli --cluster create failed");
      for (int port : ports) WaitFor(port, "cluster_state:ok", "CLUSTER INFO");
      cluster_ = "redis+cluster://";
      for (size_t i = 0; i < ports.size(); ++i) {
        cluster_ += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(ports[i]);
      }
    }
    return cluster_;
  }

  ~RedisServers() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
    std::error_code ec;
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
  }

 private:
  static bool Bindable(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    return ok;
  }
  // A free port P whose cluster bus port P + 10000 is free too (so P < 55536).
  static int FreePort() {
    static unsigned seed = static_cast<unsigned>(getpid());
    for (int i = 0; i < 1000; ++i) {
      int port = 20000 + static_cast<int>(rand_r(&seed) % 20000);
      if (Bindable(port) && Bindable(port + 10000)) return port;
    }
    throw std::runtime_error("no free loopback port pair for redis");
  }

  // Runs `redis-cli -p PORT COMMAND` until its output contains `want` (bounded: 10 s).
  static void WaitFor(int port, const std::string& want, const std::string& command) {
    for (int i = 0; i < 200; ++i) {
      std::string cmd = "redis-cli -p " + std::to_string(port) + " " + command + " 2>/dev/null";
      if (FILE* p = popen(cmd.c_str(), "r")) {
        std::string out;
        char buf[512];
        while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
        pclose(p);
        if (out.find(want) != std::string::npos) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("redis on port " + std::to_string(port) + " did not answer " + want);
  }

  void Spawn(int port, std::vector<std::string> extra) {
    std::string templ = (std::filesystem::temp_directory_path() / "anteroom-redis-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dirs_.push_back(templ);
    std::vector<std::string> args{
        "redis-server", "--port",    std::to_string(port), "--bind", "127.0.0.1",
        "--save",       "",          "--appendonly",       "no",     "--dir",
        templ,          "--logfile", templ + "/redis.log"};
    args.insert(args.end(), extra.begin(), extra.end());
    // argv is built before the fork: the child of a threaded process must not allocate (under
    // ASan a lock another thread held at the fork would hang it).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      execvp("redis-server", argv.data());
      _exit(127);
    }
    if (pid < 0) throw std::runtime_error("fork failed");
    pids_.push_back(pid);
    WaitFor(port, "PONG", "PING");
  }

  std::string single_, cluster_;
  std::vector<pid_t> pids_;
  std::vector<std::string> dirs_;
};

}  // namespace anteroom::store::conformance
