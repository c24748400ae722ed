// The live hub's own work at full scale, without sockets: N waiting sessions, each with an open
// live stream that only counts what it is given, and one admission per iteration (every client's
// position moves, so every client gets a new status). An iteration is one whole delivery round:
// the line read and walked, each client's status compared, formatted and handed to its stream.
//
// This is the part of the live channel's target (exact positions to 100k clients within 1 s)
// that does not depend on the kernel; `anteroom-bench live` measures it with real WebSockets up
// to the file-descriptor limit, and bench/loopback_floor what the kernel adds per message.
//
//   live_hub_bench [--benchmark_filter=...]
//
// CPU time is the hub's thread (everything here runs on it); real time also holds the waits for
// the next tick: with the server's default tick (250 ms) a round starts at most every 250 ms.
#include <benchmark/benchmark.h>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "core/token.h"
#include "http/live_stream.h"
#include "server/live_hub.h"
#include "store/memory/memory_backend.h"

namespace anteroom::server {
namespace {

namespace net = boost::asio;
using http::LiveStreamOptions;
using http::Socket;

// A live stream that takes every message at once and counts it.
class CountingStream final : public LiveStream {
 public:
  CountingStream(net::io_context& ioc, std::atomic<int64_t>& messages)
      : LiveStream(LiveStreamOptions{}, ioc.get_executor()),
        ioc_(ioc),
        messages_(messages),
        socket_(ioc.get_executor()) {}
  Executor executor() override { return ioc_.get_executor(); }
  size_t BufferBytes() const override { return 0; }

 protected:
  void WriteMessage(const std::string&) override {
    messages_.fetch_add(1, std::memory_order_relaxed);
    Written(true);
  }
  void CloseTransport(bool) override {}
  Socket& TcpSocket() override { return socket_; }  // never opened: socket options do nothing

 private:
  net::io_context& ioc_;
  std::atomic<int64_t>& messages_;
  Socket socket_;
};

template <typename T>
T Await(net::io_context& ioc, std::future<T>& f) {
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) ioc.run_one();
  return f.get();
}

// One room with a holder and `n` waiting sessions, each watched by a stream.
struct Fixture {
  explicit Fixture(int64_t n)
      : backend(clock, store::MemoryBackendOptions{.run_timer = false}),
        signer("live-hub-bench", 600'000),
        hub(backend, signer, clock, ioc, LiveHubOptions{}) {
    core::RoomPatch patch;
    patch.capacity = 1;
    patch.checkin_timeout_ms = 3'600'000;  // keep-alive check-ins every 10 s: not in the rounds
    patch.grace_ms = 3'600'000;
    Call<core::RoomInfo>([&](auto done) { backend.PutRoom("bench", patch, done); });
    holder = "holder";
    Call<core::SessionView>([&](auto done) { backend.Check("bench", holder, done); });
    hub.Start();
    for (int64_t i = 0; i < n; ++i) {
      std::string id = "session-" + std::to_string(i);
      auto view = Call<core::SessionView>([&](auto done) { backend.Check("bench", id, done); });
      hub.Attach("bench", view, std::make_shared<CountingStream>(ioc, messages));
      next.push_back(id);
    }
    ioc.poll();
  }

  template <typename T, typename Start>
  T Call(Start start) {
    auto p = std::make_shared<std::promise<OpResult<T>>>();
    auto f = p->get_future();
    start([p](OpResult<T> r) { p->set_value(std::move(r)); });
    OpResult<T> r = Await(ioc, f);
    if (!r.ok()) throw std::runtime_error(r.message());
    return std::move(*r);
  }

  // The holder leaves for good: the first in line is admitted and everyone moves up one.
  // Returns the number of clients that must now be told their new place.
  int64_t Admit() {
    Call<core::SessionView>([&](auto done) { backend.Leave("bench", holder, true, done); });
    holder = next[admitted++];
    return static_cast<int64_t>(next.size()) - admitted;
  }

  net::io_context ioc;
  SystemClock clock;
  store::MemoryBackend backend;
  core::TokenSigner signer;
  LiveHub hub;
  std::atomic<int64_t> messages{0};
  std::string holder;
  std::vector<std::string> next;
  size_t admitted = 0;
};

void BM_DeliveryRound(benchmark::State& state) {
  const int64_t n = state.range(0);
  Fixture f(n);
  int64_t total = 0;
  for (auto _ : state) {
    int64_t before = f.messages.load();
    int64_t want = f.Admit();
    // Every waiting client gets its new position (the admitted one its token, after a check-in).
    while (f.messages.load() - before < want) f.ioc.run_one();
    total += f.messages.load() - before;
  }
  f.hub.Stop();
  f.ioc.poll();
  state.counters["clients"] = static_cast<double>(n);
  state.counters["messages_per_round"] =
      benchmark::Counter(static_cast<double>(total), benchmark::Counter::kAvgIterations);
  state.counters["messages_per_cpu_s"] =
      benchmark::Counter(static_cast<double>(total), benchmark::Counter::kIsRate);
}
// Few iterations: each admits one of the n sessions, and a round at 1M takes a while.
BENCHMARK(BM_DeliveryRound)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace anteroom::server

BENCHMARK_MAIN();
