#include "anteroom/worker.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "anteroom/client.hpp"

namespace anteroom {

namespace {

namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kReleaseError[] = "worker closed before the job finished";
constexpr milliseconds kRetryAfter(1'000);  // after an extension or heartbeat failed

// After `failures` fetches in a row got no answer: 100 ms doubling up to 10 s, +-20% jitter.
milliseconds FetchBackoff(int failures) {
  int64_t ms = 100LL << std::min(failures, 7);
  ms = std::min<int64_t>(ms, 10'000);
  thread_local std::minstd_rand jitter(std::random_device{}());
  return milliseconds(ms * std::uniform_int_distribution<int64_t>(80, 120)(jitter) / 100);
}

std::string RandomWorkerId() {
  std::random_device rd;
  uint64_t bits = (static_cast<uint64_t>(rd()) << 32) | rd();
  char text[32];
  std::snprintf(text, sizeof text, "worker-%016llx", static_cast<unsigned long long>(bits));
  return text;
}

const json::value* Field(const json::value& v, std::string_view key) {
  return v.is_object() ? v.as_object().if_contains(key) : nullptr;
}
std::string Str(const json::value* v) {
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}
int64_t Int(const json::value* v) {
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->as_uint64());
  return 0;
}

// Per-lease outcomes of an answer: "results" of /ack, /nack and /extend, "acked" of a fetch.
std::map<std::string, const json::value*> Outcomes(const json::value& answer,
                                                   std::string_view field) {
  std::map<std::string, const json::value*> out;
  const json::value* items = Field(answer, field);
  if (items == nullptr || !items->is_array()) return out;
  for (const json::value& item : items->as_array()) out[Str(Field(item, "lease"))] = &item;
  return out;
}
bool ItemOk(const json::value* item) {
  const json::value* ok = item != nullptr ? Field(*item, "ok") : nullptr;
  return ok != nullptr && ok->is_bool() && ok->as_bool();
}
std::string Why(const HttpResult& r) {
  if (!r.error.empty()) return r.error;
  return std::to_string(r.status) + " " + r.body;
}

}  // namespace

struct Worker::Impl {
  // A job in hand, from its delivery until its handler returns (or the drain releases it).
  struct Held {
    Job job;
    SteadyClock::time_point next_extend;
  };

  WorkerOptions opt;
  Handler handler;
  bool reclaim = false;
  int wake_fd = -1;  // eventfd: RequestStop/StopNow (from signal handlers), new jobs, the end
  std::atomic<bool> stop{false};
  std::atomic<bool> stop_now{false};
  std::unique_ptr<Client> fetcher;  // Run()'s thread only, but for Interrupt()
  // Run()'s thread, for releases: the fetcher may hold a cut meant for its poll.
  std::unique_ptr<Client> releaser;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Held>> ready;                  // for the handler threads
  std::map<std::string, std::shared_ptr<Held>> held;        // by lease: ready or running
  std::vector<std::pair<std::string, std::string>> to_ack;  // lease, job id: finished
  int busy = 0;           // slots taken: held, or a failure being nacked
  bool parked = false;    // the fetcher is in a request (a long poll when wait_ms > 0)
  bool cut_sent = false;  // ... and was told to cut it short
  bool draining = false;
  bool closing = false;  // handler threads end once idle
  bool ended = false;    // the maintenance thread ends
  std::vector<char> exited;
  size_t exited_count = 0;
  size_t in_handler = 0;  // threads in the handler: after the drain, those it abandoned
  std::vector<std::thread> handlers;
  std::thread maintenance;
  bool ran = false;

  void Report(WorkerEvent::Kind kind, std::string job_id = {}, std::string text = {},
              int64_t count = 0) {
    if (opt.on_event) opt.on_event(WorkerEvent{kind, std::move(job_id), std::move(text), count});
  }

  void Wake() noexcept {
    int saved = errno;  // may run in a signal handler
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd, &one, sizeof one);
    (void)ignored;
    errno = saved;
  }

  // Under mu: a slot came free, or the drain began. A parked long poll is cut short, so the
  // finished job's ack and the free slot go out now rather than when the poll ends.
  void CutPoll() {
    if (parked && !cut_sent) {
      cut_sent = true;
      fetcher->Interrupt();
    }
  }

  // ---- the fetch loop (Run's thread) ------------------------------------------------------

  void FetchLoop() {
    bool reclaim_now = reclaim;
    int failures = 0;
    std::string path = "/v1/queues/" + Client::Segment(opt.queue) + "/fetch";
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return draining || stop.load() || busy < opt.concurrency; });
      if (draining || stop.load()) return;
      int max = opt.concurrency - busy;
      json::object body{{"worker", opt.worker_id},
                        {"max", max},
                        {"lease_ms", opt.lease_ms},
                        {"wait_ms", opt.wait_ms}};
      size_t acks_sent = to_ack.size();
      if (acks_sent > 0) {
        json::array leases;
        for (const auto& [lease, id] : to_ack) leases.emplace_back(lease);
        body["ack"] = std::move(leases);
      }
      if (reclaim_now) body["reclaim"] = true;
      parked = true;
      cut_sent = false;
      lock.unlock();
      HttpResult r = fetcher->Request("POST", path, json::serialize(body));
      lock.lock();
      parked = false;
      const json::value* jobs = Field(r.json, "jobs");
      if (!r.ok() || jobs == nullptr || !jobs->is_array()) {
        if (reclaim_now && r.status == 400) {
          reclaim_now = false;  // a server without reclaim: refused, nothing applied
          Report(WorkerEvent::Kind::kReclaimUnsupported, {}, r.body);
          continue;
        }
        if (r.interrupted) continue;  // a slot came free, or the drain began
        Report(WorkerEvent::Kind::kRequestFailed, {}, "fetch: " + Why(r));
        // The acks stay: acks are idempotent, they go again with the next fetch.
        cv.wait_for(lock, FetchBackoff(failures++), [&] { return draining || stop.load(); });
        continue;
      }
      failures = 0;
      if (reclaim_now) {
        reclaim_now = false;
        if (const json::value* n = Field(r.json, "reclaimed"); n != nullptr && Int(n) > 0) {
          Report(WorkerEvent::Kind::kReclaimed, {}, {}, Int(n));
        }
      }
      if (acks_sent > 0) {
        auto outcomes = Outcomes(r.json, "acked");
        for (size_t i = 0; i < acks_sent; ++i) ReportAck(to_ack[i], outcomes);
        to_ack.erase(to_ack.begin(), to_ack.begin() + static_cast<ptrdiff_t>(acks_sent));
      }
      auto answer = std::make_shared<const std::string>(std::move(r.body));
      std::vector<std::string> late;  // delivered after the stop: handed back unstarted
      std::vector<std::string> late_ids;
      const json::array& list = jobs->as_array();
      for (size_t i = 0; i < list.size(); ++i) {
        auto h = std::make_shared<Held>();
        Job& job = h->job;
        job.id = Str(Field(list[i], "id"));
        job.lease = Str(Field(list[i], "lease"));
        job.attempt = Int(Field(list[i], "attempt"));
        job.lease_expires_ms = Int(Field(list[i], "lease_expires_ms"));
        job.priority = Int(Field(list[i], "priority"));
        if (const json::value* p = Field(list[i], "payload")) job.payload = *p;
        job.answer = answer;
        job.index = i;
        job.abandoned_ = std::make_shared<std::atomic<bool>>(false);
        if (draining || stop.load() || busy >= opt.concurrency) {
          late.push_back(job.lease);
          late_ids.push_back(job.id);
          continue;
        }
        h->next_extend = SteadyClock::now() + milliseconds(opt.lease_ms / 3);
        ++busy;
        held[job.lease] = h;
        ready.push_back(std::move(h));
      }
      if (!list.empty()) {
        cv.notify_all();
        Wake();  // the maintenance thread plans the new jobs' extensions
      }
      if (!late.empty()) {
        lock.unlock();
        Release(*releaser, late, late_ids);
        lock.lock();
      }
    }
  }

  void ReportAck(const std::pair<std::string, std::string>& ack,
                 const std::map<std::string, const json::value*>& outcomes) {
    auto it = outcomes.find(ack.first);
    const json::value* item = it == outcomes.end() ? nullptr : it->second;
    if (ItemOk(item)) return Report(WorkerEvent::Kind::kAcked, ack.second);
    Report(WorkerEvent::Kind::kAckRefused, ack.second,
           item != nullptr ? json::serialize(*item) : "no answer");
  }

  // Hands jobs back at once (nack, delay 0), so another worker takes them now.
  void Release(Client& client, const std::vector<std::string>& leases,
               const std::vector<std::string>& ids) {
    HttpResult r = client.Nack(opt.queue, leases, int64_t{0}, kReleaseError);
    auto outcomes = Outcomes(r.json, "results");
    for (size_t i = 0; i < leases.size(); ++i) {
      auto it = outcomes.find(leases[i]);
      if (r.ok() && it != outcomes.end() && ItemOk(it->second)) {
        Report(WorkerEvent::Kind::kReleased, ids[i]);
      } else {
        Report(WorkerEvent::Kind::kRequestFailed, ids[i],
               "release: " + (it != outcomes.end() ? json::serialize(*it->second) : Why(r)));
      }
    }
  }

  // ---- the handler threads ----------------------------------------------------------------

  void HandlerLoop(size_t index) {
    std::unique_ptr<Client> client;  // for nacks, made at the first
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return closing || !ready.empty(); });
      if (ready.empty()) break;
      std::shared_ptr<Held> h = std::move(ready.front());
      ready.pop_front();
      ++in_handler;
      lock.unlock();
      HandlerResult result;
      try {
        result = handler(h->job);
      } catch (const std::exception& e) {
        result = HandlerResult::Failure(e.what());
      } catch (...) {
        result = HandlerResult::Failure("the handler threw");
      }
      lock.lock();
      --in_handler;
      if (h->job.abandoned()) {  // released by the drain: the answer is not ours to give
        --busy;
        cv.notify_all();
        continue;
      }
      held.erase(h->job.lease);
      if (result.ok) {
        to_ack.emplace_back(h->job.lease, h->job.id);
        --busy;
        cv.notify_all();
        CutPoll();
        continue;
      }
      lock.unlock();
      if (!client) client = std::make_unique<Client>(opt.server_url, opt.key, opt.tls);
      HttpResult r = client->Nack(opt.queue, {h->job.lease}, std::nullopt, result.error);
      auto outcomes = Outcomes(r.json, "results");
      bool taken = r.ok() && ItemOk(outcomes[h->job.lease]);
      lock.lock();
      Report(taken ? WorkerEvent::Kind::kNacked : WorkerEvent::Kind::kRequestFailed, h->job.id,
             taken ? result.error : "nack: " + Why(r));
      --busy;
      cv.notify_all();
      CutPoll();
    }
    exited[index] = 1;
    ++exited_count;
    cv.notify_all();
  }

  // ---- extensions, heartbeats, and the bridge from RequestStop ------------------------------

  void MaintenanceLoop() {
    Client client(opt.server_url, opt.key, opt.tls);
    std::string heartbeat = "/v1/queues/" + Client::Segment(opt.queue) + "/workers/" +
                            Client::Segment(opt.worker_id) + "/heartbeat";
    std::string heartbeat_body = json::serialize(json::object{{"ttl_ms", opt.heartbeat_ms}});
    auto next_heartbeat = SteadyClock::now();
    bool stop_seen = false;
    bool stop_now_seen = false;
    while (true) {
      {
        std::lock_guard lock(mu);
        if (ended) return;
        if (stop.load() && !stop_seen) {
          stop_seen = true;
          draining = true;
          CutPoll();
          cv.notify_all();
        }
        if (stop_now.load() && !stop_now_seen) {
          stop_now_seen = true;
          cv.notify_all();
        }
      }
      auto now = SteadyClock::now();
      if (now >= next_heartbeat) {
        HttpResult r = client.Request("POST", heartbeat, heartbeat_body);
        if (!r.ok()) Report(WorkerEvent::Kind::kRequestFailed, {}, "heartbeat: " + Why(r));
        next_heartbeat = now + (r.ok() ? milliseconds(std::max<int64_t>(opt.heartbeat_ms / 3, 1))
                                       : std::min(kRetryAfter, milliseconds(opt.heartbeat_ms / 3)));
      }
      Extend(client);
      auto wake_at = next_heartbeat;
      {
        std::lock_guard lock(mu);
        for (const auto& [lease, h] : held) wake_at = std::min(wake_at, h->next_extend);
      }
      auto wait = std::chrono::duration_cast<milliseconds>(wake_at - SteadyClock::now());
      pollfd fd{wake_fd, POLLIN, 0};
      poll(&fd, 1, static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 60'000)));
      uint64_t count;
      ssize_t ignored = read(wake_fd, &count, sizeof count);  // non-blocking
      (void)ignored;
    }
  }

  // Extends the leases of jobs whose time has come (a third of the lease since the last), in
  // one request.
  void Extend(Client& client) {
    std::vector<std::shared_ptr<Held>> due;
    std::vector<std::string> leases;
    auto now = SteadyClock::now();
    {
      std::lock_guard lock(mu);
      for (const auto& [lease, h] : held) {
        if (h->next_extend <= now) {
          due.push_back(h);
          leases.push_back(lease);
        }
      }
    }
    if (due.empty()) return;
    HttpResult r = client.Extend(opt.queue, leases, opt.lease_ms);
    auto outcomes = Outcomes(r.json, "results");
    std::lock_guard lock(mu);
    for (const auto& h : due) {
      if (!r.ok()) {
        h->next_extend = now + std::min(kRetryAfter, milliseconds(opt.lease_ms / 6));
        continue;
      }
      auto it = outcomes.find(h->job.lease);
      if (it != outcomes.end() && ItemOk(it->second)) {
        h->next_extend = now + milliseconds(opt.lease_ms / 3);
        continue;
      }
      h->next_extend = SteadyClock::time_point::max();  // lost: not ours to extend any more
      if (held.count(h->job.lease) == 0) continue;      // finished meanwhile: its ack went first
      Report(WorkerEvent::Kind::kLeaseLost, h->job.id,
             it != outcomes.end() ? json::serialize(*it->second) : "no answer");
    }
    if (!r.ok()) Report(WorkerEvent::Kind::kRequestFailed, {}, "extend: " + Why(r));
  }

  // ---- the drain -----------------------------------------------------------------------------

  void Drain() {
    std::unique_lock lock(mu);
    draining = true;
    Report(WorkerEvent::Kind::kDraining);
    auto deadline = SteadyClock::now() + milliseconds(opt.shutdown_grace_ms);
    cv.wait_until(lock, deadline, [&] { return busy == 0 || stop_now.load(); });
    std::vector<std::string> leases, ids;
    for (auto& [lease, h] : held) {
      h->job.abandoned_->store(true);
      leases.push_back(lease);
      ids.push_back(h->job.id);
    }
    held.clear();
    busy -= static_cast<int>(ready.size());  // (never started: no thread holds them)
    ready.clear();
    closing = true;
    cv.notify_all();
    std::vector<std::pair<std::string, std::string>> acks = std::move(to_ack);
    to_ack.clear();
    lock.unlock();
    if (!leases.empty()) Release(*releaser, leases, ids);
    if (!acks.empty()) {
      std::vector<std::string> ack_leases;
      for (const auto& a : acks) ack_leases.push_back(a.first);
      HttpResult r = releaser->Ack(opt.queue, ack_leases);
      if (!r.ok()) Report(WorkerEvent::Kind::kRequestFailed, {}, "ack: " + Why(r));
      auto outcomes = Outcomes(r.json, "results");
      for (const auto& a : acks) ReportAck(a, outcomes);
    }
  }

  void JoinAll() {
    if (maintenance.joinable()) {
      {
        std::lock_guard lock(mu);
        ended = true;
      }
      Wake();
      maintenance.join();
    }
    {
      std::lock_guard lock(mu);
      closing = true;
      cv.notify_all();
    }
    for (auto& t : handlers) {
      if (t.joinable()) t.join();
    }
  }
};

Worker::Worker(WorkerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (options.queue.empty()) throw std::invalid_argument("Worker: no queue");
  if (options.concurrency < 1 || options.concurrency > 1000) {
    throw std::invalid_argument("Worker: concurrency must be 1..1000");
  }
  if (options.lease_ms < 100 || options.heartbeat_ms < 1 || options.wait_ms < 0 ||
      options.wait_ms > 60'000 || options.shutdown_grace_ms < 0) {
    throw std::invalid_argument("Worker: lease_ms, heartbeat_ms, wait_ms or grace out of range");
  }
  if (!handler) throw std::invalid_argument("Worker: no handler");
  m.reclaim = options.reclaim_on_start.value_or(!options.worker_id.empty());
  if (options.worker_id.empty()) options.worker_id = RandomWorkerId();
  m.opt = std::move(options);
  m.handler = std::move(handler);
  m.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m.wake_fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  m.fetcher = std::make_unique<Client>(m.opt.server_url, m.opt.key, m.opt.tls);
}

Worker::~Worker() {
  impl_->JoinAll();
  close(impl_->wake_fd);
}

void Worker::Run() {
  Impl& m = *impl_;
  if (m.ran) return;
  m.ran = true;
  m.releaser = std::make_unique<Client>(m.opt.server_url, m.opt.key, m.opt.tls);
  m.exited.assign(static_cast<size_t>(m.opt.concurrency), 0);
  for (size_t i = 0; i < m.exited.size(); ++i) {
    m.handlers.emplace_back([&m, i] { m.HandlerLoop(i); });
  }
  m.maintenance = std::thread([&m] { m.MaintenanceLoop(); });
  m.FetchLoop();
  m.Drain();
  {
    std::lock_guard lock(m.mu);
    m.ended = true;
  }
  m.Wake();
  m.maintenance.join();
  // Idle handler threads end now and are joined; one still in a handler the drain abandoned is
  // joined by the destructor.
  {
    std::unique_lock lock(m.mu);
    m.cv.wait(lock, [&] { return m.exited_count + m.in_handler == m.handlers.size(); });
  }
  for (size_t i = 0; i < m.handlers.size(); ++i) {
    bool done;
    {
      std::lock_guard lock(m.mu);
      done = m.exited[i] != 0;
    }
    if (done) m.handlers[i].join();
  }
  m.Report(WorkerEvent::Kind::kStopped);
}

void Worker::RequestStop() noexcept {
  impl_->stop.store(true);
  impl_->Wake();
}

void Worker::StopNow() noexcept {
  impl_->stop_now.store(true);
  impl_->stop.store(true);
  impl_->Wake();
}

bool Worker::stopping() const noexcept { return impl_->stop.load(); }

const std::string& Worker::worker_id() const { return impl_->opt.worker_id; }

}  // namespace anteroom
