// What the kernel alone costs to push one small message to each of N loopback TCP connections
// while something reads them: the floor under the live channel's numbers on this machine
// (docs/benchmarks.md, "Live channel"). No anteroom code runs here.
//
//   loopback_floor [N [SENDERS [ROUNDS [BYTES]]]]   (defaults: 9000 2 5 180)
//
// Opens N connected pairs on 127.0.0.1 (2N descriptors: N is capped by the fd limit), then per
// round: SENDERS threads send() BYTES to every server-side socket (non-blocking, TCP_NODELAY,
// as a live stream writes a status), while one thread epoll_wait()s on the client sides and
// recv()s everything, as a load generator does. Prints, per round, the time until every message
// was received, per message, and that time scaled to 100,000 connections, and the CPU time of
// the sending threads per message (what compares with a server's CPU per pushed message: the
// send and, on loopback, the receiver's TCP work it runs).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

using SteadyClock = std::chrono::steady_clock;

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void NoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) Die("TCP_NODELAY");
}

}  // namespace

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 9000;
  int senders = argc > 2 ? std::atoi(argv[2]) : 2;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  size_t bytes = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 180;
  rlimit fds{};
  getrlimit(RLIMIT_NOFILE, &fds);
  fds.rlim_cur = fds.rlim_max;
  setrlimit(RLIMIT_NOFILE, &fds);
  long fit = (static_cast<long>(fds.rlim_cur) - 64) / 2;
  if (n > fit) {
    std::fprintf(stderr, "loopback_floor: %ld connections need %ld descriptors; using %ld\n", n,
                 2 * n + 64, fit);
    n = fit;
  }
  if (n <= 0 || senders <= 0 || rounds <= 0 || bytes == 0 || bytes > 65536) {
    std::fprintf(stderr, "usage: loopback_floor [N [SENDERS [ROUNDS [BYTES]]]]\n");
    return 2;
  }

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Die("bind");
  if (listen(listener, 4096) != 0) Die("listen");
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);

  int epoll = epoll_create1(0);
  std::vector<int> servers, clients;
  for (long i = 0; i < n; ++i) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Die("connect");
    int s = accept(listener, nullptr, nullptr);
    if (s < 0) Die("accept");
    NoDelay(c);
    NoDelay(s);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = c;
    epoll_ctl(epoll, EPOLL_CTL_ADD, c, &ev);
    clients.push_back(c);
    servers.push_back(s);
  }
  close(listener);

  std::atomic<long> received{0};  // bytes
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    epoll_event events[256];
    std::vector<char> buffer(1 << 16);
    while (!stop.load(std::memory_order_relaxed)) {
      int k = epoll_wait(epoll, events, 256, 20);
      for (int i = 0; i < k; ++i) {
        ssize_t r = recv(events[i].data.fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
        if (r > 0) received.fetch_add(r, std::memory_order_relaxed);
      }
    }
  });

  std::string message(bytes, 'x');
  std::printf("loopback_floor: %ld connections, %d sender thread(s), %zu-byte messages\n", n,
              senders, bytes);
  for (int round = 0; round < rounds; ++round) {
    long want = received.load() + n * static_cast<long>(bytes);
    auto start = SteadyClock::now();
    std::vector<std::thread> threads;
    std::atomic<long> sender_cpu_ns{0};
    for (int t = 0; t < senders; ++t) {
      threads.emplace_back([&, t] {
        for (long i = t; i < n; i += senders) {
          send(servers[i], message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        timespec cpu{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
        sender_cpu_ns.fetch_add(cpu.tv_sec * 1'000'000'000L + cpu.tv_nsec);
      });
    }
    for (auto& th : threads) th.join();
    auto deadline = start + std::chrono::seconds(30);
    while (received.load() < want && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    std::printf(
        "round %d: all received in %.1f ms, %.2f us per message, %.0f ms for 100,000; "
        "senders' CPU %.2f us per message%s\n",
        round + 1, ms, ms * 1000 / static_cast<double>(n), ms * 100'000 / static_cast<double>(n),
        static_cast<double>(sender_cpu_ns.load()) / 1000 / static_cast<double>(n),
        received.load() < want ? " (INCOMPLETE)" : "");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop = true;
  reader.join();
  for (int fd : servers) close(fd);
  for (int fd : clients) close(fd);
  close(epoll);
}
