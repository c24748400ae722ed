// `anteroom-bench queue`: pushes N jobs while W workers fetch and ack them, B jobs per request,
// and prints one JSON line (loopback, bounded), like redis-benchmark. Connections are
// asynchronous and may pipeline P requests each, so the generator costs little next to the
// server it measures. Each payload carries its push time, so workers measure push-to-fetch
// latency on the same steady clock. With --rate the producers push at a fixed pace instead of
// as fast as they can: that measures latency on an idle queue with long-polling workers.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "anteroom/client.hpp"
#include "load/kit.h"
#include "load/load.h"
#include "load/pipelined_conn.h"

namespace anteroom::load {

namespace {

namespace net = boost::asio;

struct BenchQueueFlags {
  std::string queue;
  int64_t jobs = 100'000;
  int workers = 4;
  int producers = 1;
  int batch = 1;       // jobs per fetch and ack
  int push_batch = 0;  // jobs per push; 0: as --batch
  int pipeline = 1;
  int worker_pipeline = 0;  // fetches a worker keeps in flight; 0: as --pipeline
  int threads = 1;
  bool separate_acks = false;
  double rate = 0;     // jobs per second over all producers; 0: as fast as possible
  int64_t groups = 0;  // > 0: job k goes to group "g<k mod groups>"
  double timeout_s = 120;
};

// What all connections share. Counters are atomic: connections run on several threads.
struct Run {
  BenchQueueFlags flags;
  std::string push_path, fetch_path, ack_path;
  std::atomic<int64_t> claimed{0};  // jobs handed to a producer so far
  std::atomic<int64_t> acked{0};
  std::atomic<int64_t> pushed{0};  // jobs whose push answered 201
  std::atomic<int64_t> errors{0};
  std::mutex mu;
  std::condition_variable finished;
  bool done = false;

  void Finish() {
    std::lock_guard lock(mu);
    done = true;
    finished.notify_all();
  }
  void Error(const std::string& what) {
    if (errors.fetch_add(1) < 5) fmt::print(stderr, "bench queue: {}\n", what);
  }
};

class Producer : public PipelinedConn {
 public:
  Producer(net::io_context& ioc, std::string host, Run& run, int index)
      : PipelinedConn(ioc, std::move(host)), run_(run), timer_(ioc), index_(index) {}

 protected:
  void OnConnected() override {
    if (run_.flags.rate > 0) {
      // Producers take turns: producer i sends at start + (i + k * producers) * interval.
      interval_ = std::chrono::duration<double>(run_.flags.push_batch / run_.flags.rate);
      next_ = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                       interval_ * static_cast<double>(index_));
      return Pace();
    }
    for (int i = 0; i < run_.flags.pipeline; ++i) PushNext();
  }

  void OnAnswer(int, int status, std::string& body) override {
    if (status != 201) {
      run_.Error(fmt::format("push answered {}: {}", status, body));
    } else if (run_.pushed.fetch_add(run_.flags.push_batch) + run_.flags.push_batch >=
                   run_.flags.jobs &&
               run_.flags.workers == 0) {
      return run_.Finish();  // push only: done when every push was answered
    }
    if (run_.flags.rate <= 0) PushNext();
  }

  void OnFailure(const std::string& what) override { run_.Error("producer: " + what); }

 private:
  bool PushNext() {
    int64_t first = run_.claimed.fetch_add(run_.flags.push_batch);
    if (first >= run_.flags.jobs) return false;
    int64_t n = std::min<int64_t>(run_.flags.push_batch, run_.flags.jobs - first);
    body_.clear();
    auto it = std::back_inserter(body_);
    int64_t now = NowUs();
    const int64_t groups = run_.flags.groups;
    auto job = [&](int64_t k) {
      if (groups > 0) {
        fmt::format_to(it, FMT_COMPILE(R"({{"payload":{},"group":"g{}"}})"), now, k % groups);
      } else {
        fmt::format_to(it, FMT_COMPILE(R"({{"payload":{}}})"), now);
      }
    };
    if (run_.flags.push_batch == 1) {
      job(first);
    } else {
      body_ += R"({"jobs":[)";
      for (int64_t i = 0; i < n; ++i) {
        if (i) body_ += ',';
        job(first + i);
      }
      body_ += "]}";
    }
    Send("POST", run_.push_path, body_, 0);
    return true;
  }

  void Pace() {
    auto stride = std::chrono::duration_cast<SteadyClock::duration>(
        interval_ * static_cast<double>(run_.flags.producers));
    timer_.expires_at(next_);
    next_ += stride;
    timer_.async_wait([self = std::static_pointer_cast<Producer>(shared_from_this())](
                          boost::system::error_code ec) {
      if (ec) return;
      if (self->PushNext()) self->Pace();
    });
  }

  Run& run_;
  net::steady_timer timer_;
  int index_;
  std::chrono::duration<double> interval_{};
  SteadyClock::time_point next_;
  std::string body_;
};

// Takes jobs and acks them. By default the ack rides on the next fetch (one request per
// round); with --separate-acks it is its own request, sent in the same write as the fetch.
// While the queue has work a worker keeps --pipeline fetches in flight (wait_ms 0); when one
// comes back empty and no other is out, it long-polls: pipelined long polls would wait one
// after the other.
class Worker : public PipelinedConn {
 public:
  enum Tag { kFetch, kAck };
  Worker(net::io_context& ioc, std::string host, Run& run, int index)
      : PipelinedConn(ioc, std::move(host)),
        run_(run),
        prefix_(fmt::format(R"({{"worker":"bench-worker-{}","max":{},"lease_ms":30000)", index,
                            run.flags.batch)) {}
  std::vector<int64_t> latencies_us;

 protected:
  void OnConnected() override { LongPoll(); }

  void OnAnswer(int tag, int status, std::string& body) override {
    if (tag == kFetch) --fetches_;
    boost::system::error_code ec;
    // The answer is parsed into an arena reused for every answer: the generator must stay
    // cheap next to the server it measures.
    boost::json::monotonic_resource arena(arena_buffer_.data(), arena_buffer_.size());
    boost::json::value answer;
    if (status == 200) answer = boost::json::parse(body, ec, &arena);
    if (status != 200 || ec) {
      run_.Error(fmt::format("{} answered {}: {}", tag == kFetch ? "fetch" : "ack", status, body));
      if (fetches_ == 0) LongPoll();
      return;
    }
    const boost::json::object& o = answer.as_object();
    if (const auto* results = o.if_contains(tag == kFetch ? "acked" : "results")) {
      if (CountAcked(results->as_array())) return;
    }
    if (tag == kAck) return;
    int64_t now = NowUs();
    leases_.clear();
    bool any = false;
    for (const auto& job : o.at("jobs").as_array()) {
      latencies_us.push_back(now - job.at("payload").to_number<int64_t>());
      fmt::format_to(std::back_inserter(leases_), R"({}"{}")", any ? "," : "",
                     std::string_view(job.at("lease").as_string()));
      any = true;
    }
    if (!any) {
      if (fetches_ == 0) LongPoll();
      return;
    }
    if (run_.flags.separate_acks) {
      body_ = fmt::format(R"({{"leases":[{}]}})", leases_);
      Send("POST", run_.ack_path, body_, kAck);
      body_ = prefix_ + R"(,"wait_ms":0})";
    } else if (fetches_ == 0 && run_.claimed.load() < run_.flags.jobs) {
      // Nothing else in flight and more jobs to come: the ack rides on a long poll, one request
      // per job at low load. (Once every job is pushed, waiting would only delay the last ack.)
      body_ = fmt::format(R"({},"wait_ms":200,"ack":[{}]}})", prefix_, leases_);
    } else {
      body_ = fmt::format(R"({},"wait_ms":0,"ack":[{}]}})", prefix_, leases_);
    }
    SendFetch();
    // The queue has work: one more fetch in flight, up to --pipeline. Empty answers shrink the
    // pipeline again, so a worker faster than its producers does not flood the server.
    body_ = prefix_ + R"(,"wait_ms":0})";
    if (fetches_ < run_.flags.worker_pipeline) SendFetch();
  }

  void OnFailure(const std::string& what) override { run_.Error("worker: " + what); }

 private:
  void LongPoll() {
    body_ = prefix_ + R"(,"wait_ms":200})";
    SendFetch();
  }
  void SendFetch() {
    Send("POST", run_.fetch_path, body_, kFetch);
    ++fetches_;
  }

  // Counts ack outcomes; true when every job is acked (the run is over).
  bool CountAcked(const boost::json::array& results) {
    int64_t ok = 0;
    for (const auto& item : results) {
      if (item.at("ok").as_bool())
        ++ok;
      else
        run_.Error("ack refused: " + boost::json::serialize(item));
    }
    if (ok == 0 || run_.acked.fetch_add(ok) + ok < run_.flags.jobs) return false;
    run_.Finish();
    return true;
  }

  Run& run_;
  std::string prefix_;  // the fetch body up to its wait and ack fields
  std::string leases_;
  std::string body_;
  int fetches_ = 0;  // fetch requests in flight
  std::vector<unsigned char> arena_buffer_ = std::vector<unsigned char>(256 * 1024);
};

int RunBenchQueue(BenchQueueFlags f, const ClientFlags& cf) {
  auto url = boost::urls::parse_uri(cf.server);
  if (!url) throw std::runtime_error("--server must be a URL like http://127.0.0.1:8080");
  std::string host(url->host());
  std::string port = url->has_port() ? std::string(url->port()) : "80";
  if (f.queue.empty()) f.queue = fmt::format("bench-{}", NowUs());
  if (f.push_batch == 0) f.push_batch = f.batch;
  if (f.worker_pipeline == 0) f.worker_pipeline = f.pipeline;

  Run run;
  run.flags = f;
  std::string base = "/v1/queues/" + Client::Segment(f.queue);
  run.push_path = base + "/jobs";
  run.fetch_path = base + "/fetch";
  run.ack_path = base + "/ack";

  // One io_context per client thread; connections are spread over them, so a connection's
  // handlers never run concurrently and need no strand.
  std::vector<std::unique_ptr<net::io_context>> contexts;
  for (int i = 0; i < std::max(1, f.threads); ++i)
    contexts.push_back(std::make_unique<net::io_context>(1));
  net::ip::tcp::resolver resolver(*contexts[0]);
  auto endpoints = resolver.resolve(host, port);
  std::vector<std::shared_ptr<Worker>> workers;
  std::vector<std::shared_ptr<Producer>> producers;
  size_t next_context = 0;
  auto context = [&]() -> net::io_context& { return *contexts[next_context++ % contexts.size()]; };
  for (int w = 0; w < f.workers; ++w) {
    workers.push_back(std::make_shared<Worker>(context(), host, run, w));
    workers.back()->Connect(endpoints);
  }
  auto start = SteadyClock::now();
  for (int p = 0; p < f.producers; ++p) {
    producers.push_back(std::make_shared<Producer>(context(), host, run, p));
    producers.back()->Connect(endpoints);
  }
  std::vector<std::thread> threads;
  for (auto& ioc : contexts) {
    threads.emplace_back([&ioc] {
      auto guard = net::make_work_guard(*ioc);
      ioc->run();
    });
  }
  {
    std::unique_lock lock(run.mu);
    run.finished.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000)),
                          [&] { return run.done; });
  }
  double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  for (auto& ioc : contexts) ioc->stop();
  for (auto& t : threads) t.join();

  std::vector<int64_t> latencies_us;
  for (auto& w : workers)
    latencies_us.insert(latencies_us.end(), w->latencies_us.begin(), w->latencies_us.end());

  Client client(cf.server, cf.admin_key);
  HttpResult stats = client.QueueStats(f.queue);
  // Push only (--workers 0): every job pushed and still ready.
  int64_t expect_acked = f.workers == 0 ? 0 : f.jobs;
  bool all_acked = stats.ok() && stats.json.at("acked").to_number<int64_t>() == expect_acked &&
                   stats.json.at("pushed").to_number<int64_t>() == f.jobs &&
                   stats.json.at("ready").to_number<int64_t>() == f.jobs - expect_acked &&
                   stats.json.at("inflight").to_number<int64_t>() == 0;
  int64_t done_jobs = f.workers == 0 ? std::min(run.pushed.load(), f.jobs) : run.acked.load();
  // One JSON line, numbers in plain notation (Boost.JSON would print 1.2E4).
  fmt::print(
      "{{\"jobs\":{},\"jobs_per_s\":{:.0f},\"push_to_fetch_p50_ms\":{:.3f},"
      "\"push_to_fetch_p99_ms\":{:.3f},\"push_to_fetch_max_ms\":{:.3f},\"errors\":{},"
      "\"all_acked\":{},\"workers\":{},\"producers\":{},\"batch\":{},\"push_batch\":{},"
      "\"pipeline\":{},\"worker_pipeline\":{},"
      "\"separate_acks\":{},\"rate\":{:.0f},\"duration_s\":{:.2f}}}\n",
      f.jobs, static_cast<double>(done_jobs) / secs, PercentileMs(latencies_us, 0.5),
      PercentileMs(latencies_us, 0.99), PercentileMs(latencies_us, 1.0), run.errors.load(),
      all_acked ? "true" : "false", f.workers, f.producers, f.batch, f.push_batch, f.pipeline,
      f.worker_pipeline, f.separate_acks, f.rate, secs);
  return all_acked && run.errors.load() == 0 ? 0 : 1;
}

}  // namespace

void AddQueueCommand(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<BenchQueueFlags>();
  CLI::App* queue = app.add_subcommand("queue", "Push N jobs while W workers fetch and ack them");
  queue->add_option("--server", flags.server, "anteroom server URL")->capture_default_str();
  queue->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  queue->add_option("--queue", f->queue, "Queue to use (default: a fresh bench-<time>)");
  queue->add_option("--jobs", f->jobs, "Jobs to push")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  queue->add_option("--workers", f->workers, "Worker connections (0: push only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  queue->add_option("--producers", f->producers, "Producer connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  queue
      ->add_option("--push-batch", f->push_batch,
                   "Jobs per push request (default: --batch), e.g. BullMQ's addBulk shape")
      ->check(CLI::Range(1, 1000));
  queue->add_option("--batch", f->batch, "Jobs per push, fetch and ack request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  queue
      ->add_option("--pipeline", f->pipeline,
                   "Requests each connection keeps in flight (HTTP pipelining)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  queue
      ->add_option("--worker-pipeline", f->worker_pipeline,
                   "Fetches each worker keeps in flight while the queue has work (default: "
                   "--pipeline)")
      ->check(CLI::Range(1, 1000));
  queue->add_option("--threads", f->threads, "Client threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  queue->add_flag("--separate-acks", f->separate_acks,
                  "Ack with its own request instead of on the next fetch");
  queue
      ->add_option("--rate", f->rate,
                   "Push at this many jobs/s in total (0: as fast as possible); for latency")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10'000'000.0));
  queue->add_option("--groups", f->groups, "Spread the jobs over this many groups (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  queue->add_option("--timeout", f->timeout_s, "Give up after this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  queue->callback([f, &flags] {
    int rc = RunBenchQueue(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::load
