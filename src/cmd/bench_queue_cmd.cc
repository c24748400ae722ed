// `anteroom bench queue`: pushes N jobs while W workers fetch and ack them, B jobs per request,
// over the C++ client (loopback, bounded), and prints one JSON line. Each payload carries its
// push time, so workers measure push-to-fetch latency on the same steady clock.
#include <boost/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "anteroom/client.hpp"
#include "cmd/commands.h"

namespace anteroom::cmd {

namespace {

using SteadyClock = std::chrono::steady_clock;

struct BenchQueueFlags {
  std::string queue;
  int64_t jobs = 100'000;
  int workers = 4;
  int producers = 1;
  int batch = 1;
  double timeout_s = 120;
};

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

double Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]) / 1000.0;
}

int RunBenchQueue(BenchQueueFlags f, const ClientFlags& cf) {
  if (f.queue.empty()) f.queue = fmt::format("bench-{}", NowUs());
  auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  std::atomic<int64_t> acked{0}, errors{0};
  std::mutex mu;
  std::vector<int64_t> latencies_us;
  latencies_us.reserve(static_cast<size_t>(f.jobs));

  auto start = SteadyClock::now();
  std::atomic<int64_t> claimed{0};  // jobs handed to a producer so far
  auto produce = [&] {
    Client client(cf.server, cf.admin_key);
    while (SteadyClock::now() < deadline) {
      int64_t first = claimed.fetch_add(f.batch);
      if (first >= f.jobs) break;
      int64_t n = std::min<int64_t>(f.batch, f.jobs - first);
      HttpResult r;
      if (f.batch == 1) {
        r = client.Push(f.queue, boost::json::value(NowUs()));
      } else {
        boost::json::array jobs;
        int64_t now = NowUs();
        for (int64_t i = 0; i < n; ++i) jobs.push_back(boost::json::object{{"payload", now}});
        r = client.PushBatch(f.queue, jobs);
      }
      if (!r.ok()) ++errors;  // counted; those jobs are missing and all_acked says so
    }
  };
  std::vector<std::thread> producers;
  for (int p = 0; p < f.producers; ++p) producers.emplace_back(produce);
  std::vector<std::thread> workers;
  for (int w = 0; w < f.workers; ++w) {
    workers.emplace_back([&, w] {
      Client client(cf.server, cf.admin_key);
      std::string name = fmt::format("bench-worker-{}", w);
      std::vector<int64_t> mine;
      while (acked.load() < f.jobs && SteadyClock::now() < deadline) {
        HttpResult r = client.Fetch(f.queue, name, f.batch, 30'000, 200);
        if (!r.ok()) {
          ++errors;
          continue;
        }
        int64_t now = NowUs();
        std::vector<std::string> leases;
        for (const auto& job : r.json.at("jobs").as_array()) {
          mine.push_back(now - job.at("payload").to_number<int64_t>());
          leases.emplace_back(job.at("lease").as_string());
        }
        if (leases.empty()) continue;
        HttpResult a = client.Ack(f.queue, leases);
        if (!a.ok()) {
          ++errors;
          continue;
        }
        for (const auto& item : a.json.at("results").as_array()) {
          if (item.at("ok").as_bool())
            ++acked;
          else
            ++errors;
        }
      }
      std::lock_guard lock(mu);
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : producers) t.join();
  for (auto& t : workers) t.join();
  double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();

  Client client(cf.server, cf.admin_key);
  HttpResult stats = client.QueueStats(f.queue);
  bool all_acked = stats.ok() && stats.json.at("acked").to_number<int64_t>() == f.jobs &&
                   stats.json.at("pushed").to_number<int64_t>() == f.jobs &&
                   stats.json.at("ready").to_number<int64_t>() == 0 &&
                   stats.json.at("inflight").to_number<int64_t>() == 0;
  fmt::print(
      "{{\"jobs\":{},\"jobs_per_s\":{:.0f},\"push_to_fetch_p50_ms\":{:.3f},"
      "\"push_to_fetch_p99_ms\":{:.3f},\"errors\":{},\"all_acked\":{},\"workers\":{},"
      "\"producers\":{},\"batch\":{},\"duration_s\":{:.2f}}}\n",
      f.jobs, static_cast<double>(acked.load()) / secs, Percentile(latencies_us, 0.5),
      Percentile(latencies_us, 0.99), errors.load(), all_acked ? "true" : "false", f.workers,
      f.producers, f.batch, secs);
  return all_acked && errors.load() == 0 ? 0 : 1;
}

}  // namespace

void AddBenchQueueCommand(CLI::App& bench, ClientFlags& flags) {
  auto f = std::make_shared<BenchQueueFlags>();
  CLI::App* queue = bench.add_subcommand("queue", "Push N jobs while W workers fetch and ack them");
  queue->add_option("--server", flags.server, "anteroom server URL")->capture_default_str();
  queue->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  queue->add_option("--queue", f->queue, "Queue to use (default: a fresh bench-<time>)");
  queue->add_option("--jobs", f->jobs, "Jobs to push")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  queue->add_option("--workers", f->workers, "Worker connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  queue->add_option("--producers", f->producers, "Producer connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  queue->add_option("--batch", f->batch, "Jobs per push, fetch and ack request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  queue->add_option("--timeout", f->timeout_s, "Give up after this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  queue->callback([f, &flags] {
    int rc = RunBenchQueue(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::cmd
