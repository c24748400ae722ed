// anteroom::Worker (include/anteroom/worker.hpp) in this process against a real server:
// concurrency never exceeded, acks riding on the next fetch, leases kept by extension, failures
// nacked with their error, and the drain: a parked long poll cut short by RequestStop, running
// jobs finished within the grace and their acks sent, jobs outliving the grace handed back at
// once (not after their lease), nothing new taken. Reclaim on start is off but in its own tests:
// its fallback is held to a loopback stand-in that refuses the field (400), as a server without
// it may. Every wait is bounded.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "anteroom/worker.hpp"
#include "support/api_checks.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

constexpr milliseconds kSoon = seconds(10);

int64_t MsSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count();
}

// Worker::Run on a thread of its own; the test waits for it with a bound.
class Running {
 public:
  explicit Running(Worker& w)
      : worker_(w), thread_([this] {
          worker_.Run();
          done_ = true;
        }) {}
  ~Running() {
    if (!done_) worker_.StopNow();
    thread_.join();
  }
  bool done() const { return done_; }
  // True if Run returned within `timeout`.
  bool WaitDone(milliseconds timeout) {
    return WaitFor([&] { return done_.load(); }, timeout, milliseconds(5));
  }

 private:
  Worker& worker_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Something a handler waits for, bounded.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until open (true) or `timeout` (false).
  bool Wait(milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class WorkerTest : public ServerTest {
 protected:
  WorkerOptions Options(const std::string& queue) {
    WorkerOptions o;
    o.server_url = server().url();
    o.queue = queue;
    o.worker_id = "w-" + queue;
    o.reclaim_on_start = false;  // the tests of reclaim turn it on
    o.heartbeat_ms = 5'000;
    o.wait_ms = 30'000;  // long: a stop must not wait for it
    o.on_event = [this](const WorkerEvent& e) {
      std::lock_guard lock(events_mu_);
      ++events_[e.kind];
    };
    return o;
  }
  int Events(WorkerEvent::Kind kind) {
    std::lock_guard lock(events_mu_);
    return events_[kind];
  }

  json::value Stats(const std::string& queue) {
    HttpResult r = client().QueueStats(queue);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return r.json;
  }
  int64_t Stat(const std::string& queue, std::string_view key) {
    return IntField(Stats(queue), key).value_or(-1);
  }
  std::string StatsText(const std::string& queue) { return json::serialize(Stats(queue)); }

  std::string MustPush(const std::string& queue, const json::value& payload,
                       const json::object& options = {}) {
    HttpResult r = client().Push(queue, payload, options);
    EXPECT_EQ(r.status, 201) << r.body << r.error;
    return StrField(r.json, "id").value_or("");
  }

  json::array Inflight(const std::string& queue) {
    HttpResult r = client().Request("GET", "/v1/queues/" + queue + "/inflight");
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    if (!r.json.is_object() || !r.json.as_object().contains("jobs")) return {};
    return r.json.at("jobs").as_array();
  }

  json::array Dead(const std::string& queue) {
    HttpResult r = client().Request("GET", "/v1/queues/" + queue + "/dead");
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    if (!r.json.is_object() || !r.json.as_object().contains("jobs")) return {};
    return r.json.at("jobs").as_array();
  }

  // How many POSTs the server routed to `route` (its request histogram's count in /metrics).
  int64_t Requests(std::string_view route) {
    HttpResult r = client().Request("GET", "/metrics");
    EXPECT_EQ(r.status, 200) << r.error;
    std::istringstream lines(r.body);
    std::string line;
    int64_t n = 0;
    std::string label = "route=\"" + std::string(route) + "\"";
    while (std::getline(lines, line)) {
      if (line.rfind("anteroom_http_request_duration_seconds_count{", 0) != 0) continue;
      if (line.find(label) == std::string::npos) continue;
      if (line.find("method=\"POST\"") == std::string::npos) continue;
      n += std::stoll(line.substr(line.rfind(' ') + 1));
    }
    return n;
  }

  std::mutex events_mu_;
  std::map<WorkerEvent::Kind, int> events_;
};

TEST_F(WorkerTest, ConcurrencyIsNeverExceededAndAcksRideOnTheNextFetch) {
  constexpr int kJobs = 40;
  constexpr int kConcurrency = 4;
  for (int n = 0; n < kJobs; ++n) MustPush("wc", json::object{{"n", n}});
  std::atomic<int> now{0};
  std::atomic<int> most{0};
  std::mutex seen_mu;
  std::map<int64_t, int> seen;  // n -> times handled
  WorkerOptions o = Options("wc");
  o.concurrency = kConcurrency;
  Worker worker(o, [&](const Job& job) {
    int at_once = ++now;
    int before = most.load();
    while (at_once > before && !most.compare_exchange_weak(before, at_once)) {
    }
    int64_t n = IntField(job.payload, "n").value_or(-1);
    // The first jobs wait (bounded) until all the slots are busy: a worker that ran fewer at
    // once fails below, however slow the machine.
    if (n < kConcurrency) {
      WaitFor([&] { return now.load() >= kConcurrency; }, seconds(5), milliseconds(1));
    }
    std::this_thread::sleep_for(milliseconds(5 + (n % 3) * 10));
    {
      std::lock_guard lock(seen_mu);
      ++seen[n];
    }
    --now;
    return HandlerResult::Success();
  });
  int64_t acks_before = Requests("/v1/queues/{q}/ack");
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return Stat("wc", "acked") == kJobs; }, seconds(30)))
      << StatsText("wc");
  // Every ack rode on a fetch: none went on its own while the worker ran.
  EXPECT_EQ(Requests("/v1/queues/{q}/ack"), acks_before);
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(kSoon)) << "Run did not return after RequestStop";

  EXPECT_LE(most.load(), kConcurrency) << "more handlers at once than the concurrency";
  EXPECT_EQ(most.load(), kConcurrency) << "the slots were never all used";
  EXPECT_EQ(seen.size(), static_cast<size_t>(kJobs));
  for (const auto& [n, times] : seen) EXPECT_EQ(times, 1) << "job n " << n;
  json::value stats = Stats("wc");
  EXPECT_EQ(IntField(stats, "acked"), kJobs) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  EXPECT_EQ(Events(WorkerEvent::Kind::kAcked), kJobs);
  EXPECT_EQ(Events(WorkerEvent::Kind::kRequestFailed), 0);
}

TEST_F(WorkerTest, AJobOutlivingItsLeaseKeepsItByExtension) {
  // 2.5 s of work on a lease of 900 ms: without extensions the lease runs out (expiry is within
  // a second of the deadline) and the job is delivered again.
  std::string id = MustPush("wx", json::object{{"slow", true}});
  std::atomic<int> runs{0};
  WorkerOptions o = Options("wx");
  o.lease_ms = 900;
  Worker worker(o, [&](const Job&) {
    ++runs;
    std::this_thread::sleep_for(milliseconds(2'500));
    return HandlerResult::Success();
  });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 1; }, kSoon)) << StatsText("wx");
  json::array first = Inflight("wx");
  ASSERT_EQ(first.size(), 1u) << json::serialize(first);
  int64_t first_expiry = IntField(first[0], "lease_expires_ms").value_or(0);
  std::this_thread::sleep_for(milliseconds(1'200));
  json::array later = Inflight("wx");
  ASSERT_EQ(later.size(), 1u) << "the lease ran out: " << StatsText("wx");
  EXPECT_EQ(IntField(later[0], "attempt"), 1) << json::serialize(later);
  EXPECT_GE(IntField(later[0], "lease_expires_ms").value_or(0) - first_expiry, 600)
      << "the lease was not extended";

  ASSERT_TRUE(WaitFor([&] { return Stat("wx", "acked") == 1; }, kSoon)) << StatsText("wx");
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(kSoon));
  EXPECT_EQ(runs.load(), 1) << "delivered again";
  json::value stats = Stats("wx");
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(Events(WorkerEvent::Kind::kLeaseLost), 0);
}

TEST_F(WorkerTest, RequestStopCutsAParkedLongPollShort) {
  std::atomic<int> runs{0};
  Worker worker(Options("wp"), [&](const Job&) {
    ++runs;
    return HandlerResult::Success();
  });
  Running run(worker);
  std::this_thread::sleep_for(milliseconds(500));  // parked in its 30 s long poll by now
  ASSERT_FALSE(run.done());
  auto stopped = SteadyClock::now();
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(seconds(5))) << "Run waited for the long poll";
  std::printf("[ worker   ] idle worker returned %lld ms after RequestStop\n",
              static_cast<long long>(MsSince(stopped)));
  // A job pushed now is not taken.
  MustPush("wp", json::object{{"late", true}});
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(Stat("wp", "ready"), 1) << StatsText("wp");
  EXPECT_EQ(Stat("wp", "inflight"), 0) << StatsText("wp");
}

TEST_F(WorkerTest, DrainFinishesRunningJobsSendsTheirAcksAndTakesNothingNew) {
  for (int n = 0; n < 3; ++n) MustPush("wd", json::object{{"n", n}});
  Gate gate;
  std::atomic<int> started{0};
  WorkerOptions o = Options("wd");
  o.concurrency = 2;
  Worker worker(o, [&](const Job&) {
    ++started;
    if (!gate.Wait(seconds(15))) return HandlerResult::Failure("the test never opened the gate");
    return HandlerResult::Success();
  });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return started.load() == 2; }, kSoon)) << StatsText("wd");
  int64_t acks_before = Requests("/v1/queues/{q}/ack");
  worker.RequestStop();
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_FALSE(run.done()) << "Run returned with jobs running, inside the grace";
  EXPECT_EQ(Stat("wd", "inflight"), 2) << StatsText("wd");
  gate.Open();
  ASSERT_TRUE(run.WaitDone(kSoon)) << StatsText("wd");

  EXPECT_EQ(started.load(), 2) << "a job was taken after the stop";
  json::value stats = Stats("wd");
  EXPECT_EQ(IntField(stats, "acked"), 2)
      << "the finished jobs' acks went out before Run returned " << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "ready"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 0) << json::serialize(stats);
  EXPECT_EQ(Requests("/v1/queues/{q}/ack"), acks_before + 1) << "one /ack, with both leases";
  EXPECT_EQ(Events(WorkerEvent::Kind::kReleased), 0);
}

TEST_F(WorkerTest, JobsOutlivingTheGraceAreHandedBackAtOnce) {
  // Two jobs on a 60 s lease, a grace of 300 ms. "again" comes back ready at once; "once" (one
  // attempt allowed) goes to the dead letters, which show the error the release gives.
  std::string again = MustPush("wg", json::value("again"));
  std::string once = MustPush("wg", json::value("once"), json::object{{"max_attempts", 1}});
  std::atomic<int> started{0};
  std::atomic<int> saw_abandoned{0};
  WorkerOptions o = Options("wg");
  o.concurrency = 2;
  o.lease_ms = 60'000;
  o.shutdown_grace_ms = 300;
  Worker worker(o, [&](const Job& job) {
    ++started;
    bool told = WaitFor([&] { return job.abandoned(); }, seconds(15), milliseconds(5));
    if (told) ++saw_abandoned;
    return HandlerResult::Success();  // ignored once abandoned
  });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return started.load() == 2; }, kSoon)) << StatsText("wg");
  auto stopped = SteadyClock::now();
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(seconds(5))) << "Run did not return after the grace";
  int64_t took = MsSince(stopped);
  EXPECT_GE(took, 250) << "the grace was not waited for";
  std::printf("[ worker   ] Run returned %lld ms after RequestStop (grace 300 ms)\n",
              static_cast<long long>(took));

  json::value stats = Stats("wg");  // at once: not after the 60 s lease
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "ready"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "delayed"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "dead"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "acked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 2) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  json::array dead = Dead("wg");
  ASSERT_EQ(dead.size(), 1u) << json::serialize(dead);
  EXPECT_EQ(StrField(dead[0], "id"), once);
  EXPECT_EQ(StrField(dead[0], "error"), "worker closed before the job finished");
  HttpResult next = client().Fetch("wg", "probe");
  ASSERT_EQ(next.status, 200) << next.body;
  const json::array& jobs = next.json.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 1u) << next.body;
  EXPECT_EQ(StrField(jobs[0], "id"), again);
  EXPECT_EQ(IntField(jobs[0], "attempt"), 2);
  EXPECT_EQ(Events(WorkerEvent::Kind::kReleased), 2);
  EXPECT_TRUE(WaitFor([&] { return saw_abandoned.load() == 2; }, kSoon))
      << "the handlers were not told";
}

TEST_F(WorkerTest, StopNowEndsTheGraceAtOnce) {
  MustPush("wn", json::value("long"));
  std::atomic<int> started{0};
  WorkerOptions o = Options("wn");
  o.shutdown_grace_ms = 60'000;
  Worker worker(o, [&](const Job& job) {
    ++started;
    WaitFor([&] { return job.abandoned(); }, seconds(15), milliseconds(5));
    return HandlerResult::Success();
  });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return started.load() == 1; }, kSoon)) << StatsText("wn");
  worker.RequestStop();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(run.done()) << "Run returned inside the grace";
  worker.StopNow();
  ASSERT_TRUE(run.WaitDone(seconds(5))) << "StopNow did not end the grace";
  EXPECT_EQ(Stat("wn", "ready"), 1) << StatsText("wn");
  EXPECT_EQ(Stat("wn", "inflight"), 0) << StatsText("wn");
}

TEST_F(WorkerTest, FailuresAreNackedWithTheirError) {
  for (const char* what : {"fail", "throw", "ok"}) {
    MustPush("wf", json::value(what), json::object{{"max_attempts", 1}});
  }
  Worker worker(Options("wf"), [](const Job& job) {
    if (job.payload == json::value("throw")) throw std::runtime_error("kaboom");
    if (job.payload == json::value("fail")) return HandlerResult::Failure("boom");
    return HandlerResult::Success();
  });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return Stat("wf", "dead") == 2 && Stat("wf", "acked") == 1; }, kSoon))
      << StatsText("wf");
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(kSoon));
  json::array dead = Dead("wf");
  ASSERT_EQ(dead.size(), 2u) << json::serialize(dead);
  std::map<std::string, std::string> error_of;
  for (const auto& d : dead) {
    error_of[std::string(d.at("payload").as_string())] = StrField(d, "error").value_or("");
  }
  EXPECT_EQ(error_of["fail"], "boom");
  EXPECT_EQ(error_of["throw"], "kaboom");
  EXPECT_EQ(Events(WorkerEvent::Kind::kNacked), 2);
}

// A stand-in for a server that refuses "reclaim" as an unknown field (400 invalid_argument), on
// loopback: fetches with it are refused, fetches without it answer no job after 50 ms (a short
// long poll), anything else answers {}. One thread per connection, stopped by shutting their
// sockets down.
class StrictServer {
 public:
  StrictServer() : acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    accepting_ = std::thread([this] { Accept(); });
  }
  ~StrictServer() {
    stop_ = true;
    {  // unblocks the accept
      boost::asio::io_context ioc;
      boost::asio::ip::tcp::socket poke(ioc);
      boost::beast::error_code ec;
      poke.connect(acceptor_.local_endpoint(), ec);
    }
    accepting_.join();
    std::lock_guard lock(mu_);
    for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    for (auto& t : connections_) t.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::atomic<int> with_reclaim{0};
  std::atomic<int> without_reclaim{0};

 private:
  void Accept() {
    while (!stop_) {
      auto socket = std::make_shared<boost::asio::ip::tcp::socket>(ioc_);
      boost::beast::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec || stop_) return;
      std::lock_guard lock(mu_);
      sockets_.push_back(socket);
      connections_.emplace_back([this, socket] { Serve(*socket); });
    }
  }
  void Serve(boost::asio::ip::tcp::socket& socket) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buffer;
    while (!stop_) {
      http::request<http::string_body> req;
      boost::beast::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;
      http::response<http::string_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "application/json");
      res.body() = "{}";
      if (req.target().ends_with("/fetch")) {
        json::value body = json::parse(req.body());
        if (body.as_object().contains("reclaim")) {
          ++with_reclaim;
          res.result(http::status::bad_request);
          res.body() =
              R"({"error":{"code":"invalid_argument","message":"unknown field: reclaim"}})";
        } else {
          ++without_reclaim;
          std::this_thread::sleep_for(milliseconds(50));
          res.body() = R"({"jobs":[]})";
        }
      }
      res.keep_alive(true);
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec) return;
    }
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread accepting_;
  std::mutex mu_;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::socket>> sockets_;
  std::vector<std::thread> connections_;
};

// A stable worker name asks for reclaim on the first fetch only. A server that refuses the
// field (400): the worker says so once and goes on fetching without it.
TEST_F(WorkerTest, ReclaimOnStartFallsBackWhenTheServerRefusesIt) {
  StrictServer strict;
  WorkerOptions o = Options("wr");
  o.server_url = strict.url();
  o.reclaim_on_start.reset();  // the default: on, as worker_id is given
  Worker worker(o, [](const Job&) { return HandlerResult::Success(); });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return strict.without_reclaim.load() >= 3; }, kSoon))
      << strict.with_reclaim.load() << " fetches with reclaim, " << strict.without_reclaim.load()
      << " without";
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(kSoon));
  EXPECT_EQ(strict.with_reclaim.load(), 1);
  EXPECT_EQ(Events(WorkerEvent::Kind::kReclaimUnsupported), 1);
  EXPECT_EQ(Events(WorkerEvent::Kind::kRequestFailed), 0);

  // Without a worker_id (a random one) there is nothing to reclaim: not asked.
  StrictServer other;
  WorkerOptions anonymous = Options("wr");
  anonymous.server_url = other.url();
  anonymous.worker_id.clear();
  anonymous.reclaim_on_start.reset();
  Worker nameless(anonymous, [](const Job&) { return HandlerResult::Success(); });
  EXPECT_EQ(nameless.worker_id().rfind("worker-", 0), 0u) << nameless.worker_id();
  Running second(nameless);
  ASSERT_TRUE(WaitFor([&] { return other.without_reclaim.load() >= 2; }, kSoon));
  nameless.RequestStop();
  ASSERT_TRUE(second.WaitDone(kSoon));
  EXPECT_EQ(other.with_reclaim.load(), 0);
}

// A worker started again under the name of one that died holding jobs on long leases takes them
// back on its first fetch and runs them at once, as new attempts, not after the leases.
TEST_F(WorkerTest, ReclaimOnStartTakesBackWhatTheNameHeld) {
  MustPush("wk", json::value(1));
  MustPush("wk", json::value(2));
  WorkerOptions o = Options("wk");
  HttpResult held = client().Fetch("wk", o.worker_id, 2, /*lease_ms=*/600'000);
  ASSERT_EQ(held.status, 200) << held.body;
  ASSERT_EQ(Inflight("wk").size(), 2u);
  o.reclaim_on_start.reset();  // the default: on, as worker_id is given
  std::mutex mu;
  std::vector<int64_t> attempts;
  Worker worker(o, [&](const Job& job) {
    std::lock_guard lock(mu);
    attempts.push_back(job.attempt);
    return HandlerResult::Success();
  });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return Stat("wk", "acked") == 2; }, kSoon)) << StatsText("wk");
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(kSoon));
  EXPECT_EQ(Events(WorkerEvent::Kind::kReclaimed), 1);
  EXPECT_EQ(Events(WorkerEvent::Kind::kReclaimUnsupported), 0);
  std::lock_guard lock(mu);
  EXPECT_EQ(attempts, (std::vector<int64_t>{2, 2})) << "the jobs the name held, again";
}

// Against the real server, with nothing held: the jobs are handled as by any fetch.
TEST_F(WorkerTest, ReclaimOnStartStillHandlesTheJobs) {
  MustPush("wr", json::value(1));
  MustPush("wr", json::value(2));
  WorkerOptions o = Options("wr");
  o.reclaim_on_start.reset();  // the default: on, as worker_id is given
  Worker worker(o, [](const Job&) { return HandlerResult::Success(); });
  Running run(worker);
  ASSERT_TRUE(WaitFor([&] { return Stat("wr", "acked") == 2; }, kSoon)) << StatsText("wr");
  worker.RequestStop();
  ASSERT_TRUE(run.WaitDone(kSoon));
  EXPECT_LE(Events(WorkerEvent::Kind::kReclaimUnsupported), 1);
  EXPECT_EQ(Events(WorkerEvent::Kind::kRequestFailed), 0);
}

TEST_F(WorkerTest, RequestStopBeforeRunReturnsAtOnce) {
  MustPush("wb", json::value(1));
  std::atomic<int> runs{0};
  Worker worker(Options("wb"), [&](const Job&) {
    ++runs;
    return HandlerResult::Success();
  });
  worker.RequestStop();
  auto start = SteadyClock::now();
  worker.Run();
  EXPECT_LT(MsSince(start), 5'000);
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(Stat("wb", "ready"), 1) << StatsText("wb");
}

}  // namespace
}  // namespace anteroom::testing
