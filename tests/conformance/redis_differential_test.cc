// The Redis backend's Lua is a second copy of the rules in src/core. This randomized test holds
// the copy to the original: the same random operations, at the same fake times, go to the
// memory backend (the core itself) and to the Redis backend on a real redis-server, and every
// answer must be equal, field by field. Nacks name their delay (backoff jitter is random on
// both sides); long polls are left to the conformance suite.
//
// Durations and time steps are whole 100 ms, so deadlines are often hit to the millisecond.
// Launch day goes in too: queueing methods (all but random, whose picks come from each
// backend's own randomness), scheduled events with pre-queues, overrides, suspensions and
// cancellations, and their draws in arrival order (a shuffle's order follows its seed, drawn
// by each backend: redis_draw_test.cc holds Redis's shuffles to core::FisherYates instead).
// Passes go in too: minted, redeemed (right, wrong, used up, expired, revoked), revoked and
// listed. Their ids and codes are random per backend, so each backend's are kept in mint order
// and "the k-th pass" is redeemed or revoked with that backend's own; answers are compared
// without ids and codes. Schedules of repeatable jobs go in too: put, paused, resumed, deleted
// and listed, and fired by either backend's timer between the steps, their jobs then fetched
// as any other. Job state goes in too: results at acks (and at a fetch's acks), progress and
// log lines from current, lost and forged leases, keep_acked settings that trim finished jobs
// by count and by age, and lookups of jobs in every state. Dependencies and batches go in too:
// pushes that wait on older jobs (or on ones not yet pushed), join batches or are refused for
// naming an unknown or sealed one; batches made with callbacks, sealed and read; jobs'
// dependencies read.
//
// Seeded; the seed is printed on failure and can be replayed with ANTEROOM_REDIS_DIFF_SEED
// (ANTEROOM_REDIS_DIFF_TRACE=1 prints every op and the embedded backend's answer).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "common/wire_errors.h"

namespace anteroom::store::conformance {
namespace {

constexpr int kRuns = 4;
constexpr int kOpsPerRun = 700;

template <typename T, typename Call>
OpResult<T> Wait(Call&& call) {
  auto promise = std::make_shared<std::promise<OpResult<T>>>();
  auto future = promise->get_future();
  call([promise](OpResult<T> r) { promise->set_value(std::move(r)); });
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return OpResult<T>(OpStatus::kInternal, "timeout");
  }
  return future.get();
}

std::string Show(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "none"; }
std::string Show(const core::SessionView& v) {
  return fmt::format(
      "{} {} pos={} waiting={} active={} cap={} eta={} adm={} phase={} method={} starts_in={} "
      "ends_in={} refresh={} odds={}",
      v.session, core::ToString(v.status), v.position, v.waiting, v.active, v.capacity,
      v.eta_ms ? *v.eta_ms : -1, v.admission, core::ToString(v.phase),
      core::ToString(v.queueing_method), Show(v.starts_in_ms), Show(v.ends_in_ms),
      v.refresh_after_ms,
      v.odds ? fmt::format("{}:{}/{}/{}", v.odds->chance_next, Show(v.odds->p25_ms),
                           Show(v.odds->p50_ms), Show(v.odds->p75_ms))
             : "none");
}
// The room's own settings and counts, then what is in force: the effective settings (the
// own with a running event's overrides), the open event, the prequeued count and the phase.
std::string Show(const core::RoomInfo& i) {
  const core::RoomConfig& e = i.effective;
  return fmt::format(
      "{} cap={} grace={} cto={} idle={} apm={} paused={} url={} jpm={} ppc={} pow={} gate={} "
      "page={} near={} method={} active={} waiting={} adm={} drop={} rel={} | in force: cap={} "
      "grace={} "
      "cto={} "
      "idle={} apm={} method={} event={} prequeued={} phase={}",
      i.room, i.config.capacity, i.config.grace_ms, i.config.checkin_timeout_ms,
      i.config.idle_timeout_ms.value_or(-1), i.config.admit_per_minute.value_or(-1),
      i.config.paused, i.config.target_url.value_or("(none)"),
      i.config.joins_per_minute_per_client.value_or(-1), i.config.places_per_client.value_or(-1),
      i.config.challenge_difficulty.value_or(-1), i.config.gate.value_or("(none)"),
      i.config.page.value_or("(none)"), i.config.notify_at_position.value_or(-1),
      core::ToString(i.config.queueing_method), i.active, i.waiting, i.counters.admitted_total,
      i.counters.dropped_total, i.counters.released_total, e.capacity, e.grace_ms,
      e.checkin_timeout_ms, e.idle_timeout_ms.value_or(-1), e.admit_per_minute.value_or(-1),
      core::ToString(e.queueing_method), i.event.value_or("(none)"), i.prequeued,
      core::ToString(i.phase));
}
std::string Show(const std::vector<core::PushResult>& v) {
  std::string s;
  for (const auto& p : v) s += fmt::format("{}{} ", p.id, p.created ? "" : "(dup)");
  return s;
}
std::string Show(const core::FetchAnswer& a) {
  std::string s;
  for (auto o : a.acked) s += std::string(core::ToString(o)) + " ";
  s += fmt::format("reclaimed {} ", a.reclaimed);
  for (const auto& d : a.jobs) {
    s += fmt::format("[{} {} a{} {} {} p{} g'{}'] ", d.id, d.payload, d.attempt, d.lease,
                     d.lease_expires_ms, d.priority, d.group);
  }
  return s;
}
std::string Show(const std::vector<core::LeaseOutcome>& v) {
  std::string s;
  for (auto o : v) s += std::string(core::ToString(o)) + " ";
  return s;
}
std::string Show(const core::QueueStats& q) {
  return fmt::format(
      "waiting={} ready={} delayed={} inflight={} dead={} pushed={} acked={} nacked={} "
      "expired={} cancelled={} workers={} paused={}",
      q.waiting, q.ready, q.delayed, q.inflight, q.dead, q.pushed, q.acked, q.nacked, q.expired,
      q.cancelled, q.workers, q.paused);
}
std::string Show(const core::BatchView& v) {
  return fmt::format(
      "[{} sealed={} settled={} pending={} acked={} dead={} cancelled={} created={} settled_at={} "
      "success={} complete={} on_dead={}]",
      v.id, v.sealed, v.settled, v.pending, v.acked, v.dead, v.cancelled, v.created_ms,
      v.settled_ms, v.on_success_job, v.on_complete_job, v.on_dead_job);
}
std::string Show(const std::vector<core::DependencyView>& v) {
  std::string s;
  for (const auto& d : v) {
    s += fmt::format("[{} {} {}] ", d.id, core::ToString(d.state), d.result.value_or("-"));
  }
  return s;
}
std::string Show(const std::vector<core::InflightJob>& v) {
  std::string s;
  for (const auto& j : v)
    s += fmt::format("[{} {} a{} {}] ", j.id, j.worker, j.attempt, j.lease_expires_ms);
  return s;
}
std::string Show(const std::vector<core::DeadJob>& v) {
  std::string s;
  for (const auto& j : v) {
    s += fmt::format("[{} {} a{} '{}' {} h{}] ", j.id, j.payload, j.attempts, j.error,
                     j.failed_at_ms, j.history.size());
  }
  return s;
}
std::string Show(const std::vector<core::SessionView>& v) {
  std::string s;
  for (const auto& view : v) s += "[" + Show(view) + "] ";
  return s;
}
// Versions start from each backend's own origin: only the line and the counts are compared.
std::string Show(const core::LineView& v) {
  std::string s = fmt::format(
      "active={} waiting={} cap={} flow={:.17g}/{:.17g} apm={} cto={} paused={} phase={} method={} "
      "event={}-{} line=",
      v.active, v.waiting, v.capacity, v.flow.out_per_ms, v.flow.in_per_ms,
      v.admit_per_minute ? *v.admit_per_minute : -1, v.checkin_timeout_ms, v.paused,
      core::ToString(v.phase), core::ToString(v.queueing_method), Show(v.event_starts_at),
      Show(v.event_ends_at));
  for (size_t i = 0; i < v.line.size(); ++i) s += std::string(v.line[i]) + ",";
  return s;
}
std::string Show(const core::RoomEvent& e) {
  const core::EventSpec& s = e.spec;
  const core::EventOverrides& o = s.overrides;
  return fmt::format(
      "[{} '{}' pq={} {}-{} shuffle={} scope={} suspended={} cap={} apm={} grace={} cto={} "
      "method={} page={} stage={} drawn={}]",
      e.id, s.name, Show(s.prequeue_at), s.starts_at, s.ends_at, s.shuffle_at_start,
      core::ToString(s.prequeue_scope), s.suspended, Show(o.capacity), Show(o.admit_per_minute),
      Show(o.grace_ms), Show(o.checkin_timeout_ms),
      o.queueing_method ? core::ToString(*o.queueing_method) : "none", o.page.value_or("none"),
      core::ToString(e.stage), e.shuffle ? e.shuffle->count : -1);
}
std::string Show(const std::vector<core::RoomEvent>& v) {
  std::string s;
  for (const auto& e : v) s += Show(e) + " ";
  return s;
}
// Minted passes without their ids and codes (random per backend).
std::string Show(const std::vector<core::MintedPass>& v) {
  std::string s;
  for (const auto& m : v) {
    s += fmt::format("[{} uses={} left={} expires={} created={}] ", core::ToString(m.pass.kind),
                     m.pass.uses, m.pass.uses_left, Show(m.pass.expires_at), m.pass.created_at);
  }
  return s;
}
std::string Show(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e + " ";
  return s;
}
std::string Show(const std::optional<core::RateLimit>& r) {
  return r ? fmt::format("{}/{}ms+{}", r->limit, r->period_ms, r->burst) : "none";
}
std::string Show(const core::QueueSettings& s) {
  const core::QueueLimits& l = s.limits;
  return fmt::format("{} group: rate={} conc={} queue: rate={} conc={} keep={}/{}ms",
                     l.fairness == core::Fairness::kFifo ? "fifo" : "round_robin",
                     Show(l.per_group.rate), l.per_group.concurrency, Show(l.queue.rate),
                     l.queue.concurrency, s.keep_acked.count, s.keep_acked.age_ms);
}
// A job looked up, every field.
std::string Show(const core::JobView& v) {
  std::string s = fmt::format("[{} {} '{}' p{} g'{}' a{}/{} due={} finished={} history=", v.id,
                              core::ToString(v.state), v.payload, v.priority, v.group, v.attempts,
                              v.max_attempts, v.due_ms, v.finished_ms);
  for (const auto& f : v.history) s += fmt::format("({} '{}' {})", f.attempt, f.error, f.at_ms);
  s += fmt::format(" progress={} result={} log=", v.progress.value_or("none"),
                   v.result.value_or("none"));
  for (const auto& line : v.log) s += fmt::format("({} '{}')", line.at_ms, line.text);
  s += fmt::format(" dropped={} waiting_on={} batch='{}' depends_on=", v.log_dropped, v.waiting_on,
                   v.batch);
  for (core::JobId d : v.depends_on) s += std::to_string(d) + ",";
  return s + "]";
}
std::string Show(core::LeaseOutcome o) { return core::ToString(o); }
// A schedule whole: what it pushes, its timing and its state.
std::string Show(const core::Schedule& x) {
  const core::ScheduleSpec& p = x.spec;
  const core::ScheduleState& st = x.state;
  return fmt::format(
      "[{} q={} cron='{}' tz={} every={} start={} end={} max={} {} {}/{}/{} jitter={} "
      "job='{}' p{} g'{}' a{} | created={} updated={} handled={} runs={} paused={} last={} "
      "job={} next={}]",
      x.id, p.queue, p.cron, p.time_zone, p.every_ms, Show(p.start_at_ms), Show(p.end_at_ms),
      Show(p.max_runs), core::NameOf(p.overlap), core::NameOf(p.misfire.policy), p.misfire.grace_ms,
      p.misfire.max_catchup, p.jitter_ms, p.job.payload, p.job.priority, p.job.group,
      p.job.max_attempts, st.created_at_ms, st.updated_at_ms, st.handled_through_ms, st.runs_done,
      st.paused, Show(st.last_run_ms), st.last_job ? static_cast<int64_t>(*st.last_job) : -1,
      Show(st.next_ms));
}
std::string Show(const std::vector<core::Schedule>& v) {
  std::string s;
  for (const auto& x : v) s += Show(x) + " ";
  return s;
}
std::string Show(int64_t n) { return std::to_string(n); }
std::string Show(bool b) { return b ? "true" : "false"; }
std::string Show(size_t n) { return std::to_string(n); }
std::string Show(Done) { return "done"; }
std::string Show(core::CancelOutcome c) { return std::to_string(static_cast<int>(c)); }
// A queue key's digest, every byte in hex.
std::string Show(const std::optional<std::string>& digest) {
  if (!digest) return "no key";
  std::string s = "key ";
  for (char c : *digest) s += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return s;
}

// Refusals of joins are compared whole: status, when to retry, and the message.
template <typename T>
std::string Describe(const OpResult<T>& r) {
  if (r.status() == OpStatus::kRateLimited || r.status() == OpStatus::kChallengeRequired) {
    return fmt::format("error {} retry={} '{}'", static_cast<int>(r.status()), r.retry_after_ms(),
                       r.message());
  }
  // The schedule's refusals say why in the core's words, on every backend.
  if (r.status() == OpStatus::kConflict || r.status() == OpStatus::kInvalidArgument ||
      r.status() == OpStatus::kNotFound || r.status() == OpStatus::kUnknownSchedule) {
    return fmt::format("error {} '{}'", static_cast<int>(r.status()), r.message());
  }
  if (!r.ok()) return fmt::format("error {}", static_cast<int>(r.status()));
  return Show(*r);
}

class RedisDifferentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("ANTEROOM_REDIS_DIFF_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  }
  uint64_t seed_;
};

TEST_F(RedisDifferentialTest, RedisAnswersAsTheCoreDoes) {
  for (int run = 0; run < kRuns && !HasFailure(); ++run) {
    uint64_t seed = seed_ + static_cast<uint64_t>(run);
    SCOPED_TRACE("seed " + std::to_string(seed) + " (ANTEROOM_REDIS_DIFF_SEED)");
    std::mt19937_64 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };

    // A client table of 3 per room (clients c0..c4 below), so it fills up and empties.
    MemoryHarness memory(3);
    RedisHarness redis(RedisServers::Get().Single(), 3);
    std::vector<Harness*> both{&memory, &redis};
    std::vector<std::string> leases;  // handed out so far (some stale by now)
    std::map<std::string, std::vector<std::string>> leases_of;  // the same, by queue
    // Each queue's newest job id so far: dependencies and lookups name ids around it.
    std::map<std::string, int> newest;
    auto recent_id = [&](const std::string& q) {
      return static_cast<core::JobId>(1 + pick(newest[q] + 3));
    };
    int i_now = -1;
    std::string r_now, q_now, w_now;  // this op's names, for the trace
    const bool trace = std::getenv("ANTEROOM_REDIS_DIFF_TRACE") != nullptr;

    // Runs `call(backend)` on both and compares the answers' descriptions.
    bool differed = false;
    auto same = [&](const char* what, auto call) {
      auto a = call(memory.backend());
      auto b = call(redis.backend());
      if (trace) {
        fmt::print(stderr, "op {} t={} {} r={} q={} w={}: {}\n", i_now, memory.NowMs(), what, r_now,
                   q_now, w_now, Describe(a));
      }
      if (Describe(a) != Describe(b)) {
        ADD_FAILURE() << what << " at op " << i_now << "\n memory: " << Describe(a)
                      << "\n redis:  " << Describe(b);
        differed = true;
        if (trace) {
          std::vector<std::string> all;
          for (int k = 0; k < 12; ++k) all.push_back("s" + std::to_string(k));
          for (Harness* h : both) {
            auto v = Wait<std::vector<core::SessionView>>(
                [&](auto done) { h->backend().Present(r_now, all, done); });
            fmt::print(stderr, "PROBE {}\n", Describe(v));
          }
        }
      }
      return a;
    };
    auto room = [&] { return "r" + std::to_string(pick(2)); };
    auto queue = [&] { return "q" + std::to_string(pick(2)); };
    auto session = [&] { return "s" + std::to_string(pick(12)); };
    auto worker = [&] { return "w" + std::to_string(pick(3)); };

    // Each backend's passes per room, in mint order: {id, code}.
    struct Minted {
      std::string id, code;
    };
    std::map<std::string, std::vector<Minted>> passes[2];
    auto passes_of = [&](Backend& b) -> std::map<std::string, std::vector<Minted>>& {
      return passes[&b == &memory.backend() ? 0 : 1];
    };

    for (const char* r : {"r0", "r1"}) {
      (void)same("create", [&](Backend& b) {
        core::RoomPatch p;
        p.capacity = 2;
        p.grace_ms = 1500;
        p.checkin_timeout_ms = 2000;
        p.idle_timeout_ms = std::optional<int64_t>(6000);
        return Wait<core::RoomInfo>([&](auto done) { b.PutRoom(r, p, done); });
      });
    }
    for (int i = 0; i < kOpsPerRun && !differed; ++i) {
      i_now = i;
      int op = pick(47);
      std::string r = room(), s = session(), q = queue(), w = worker();
      r_now = r, q_now = q, w_now = w;
      switch (op) {
        case 0:
          (void)same("check", [&](Backend& b) {
            return Wait<core::SessionView>([&](auto done) { b.Check(r, s, done); });
          });
          break;
        case 1:
        case 2:
        case 24: {
          core::Arrival arrival{.client = pick(6) == 0 ? "" : "c" + std::to_string(pick(5)),
                                .proof_bits = pick(4)};
          (void)same("join", [&](Backend& b) {
            return Wait<core::SessionView>([&](auto done) { b.Check(r, s, arrival, done); });
          });
          break;
        }
        case 3:
          (void)same("touch", [&](Backend& b) {
            return Wait<core::SessionView>([&](auto done) { b.Touch(r, s, done); });
          });
          break;
        case 22: {
          std::vector<std::string> present{s, session(), session()};
          (void)same("present", [&](Backend& b) {
            return Wait<std::vector<core::SessionView>>(
                [&](auto done) { b.Present(r, present, done); });
          });
          break;
        }
        case 23:
          (void)same("line", [&](Backend& b) {
            return Wait<core::LineView>([&](auto done) { b.ReadLine(r, 0, done); });
          });
          break;
        case 4: {
          bool final = pick(2) == 0;
          (void)same("leave", [&](Backend& b) {
            return Wait<core::SessionView>([&](auto done) { b.Leave(r, s, final, done); });
          });
          break;
        }
        case 5:
          (void)same("evict", [&](Backend& b) {
            return Wait<core::SessionView>([&](auto done) { b.EndSession(r, s, done); });
          });
          break;
        case 6: {
          uint64_t adm = static_cast<uint64_t>(pick(8));
          (void)same("revoked", [&](Backend& b) {
            return Wait<bool>([&](auto done) { b.IsRevoked(r, s, adm, done); });
          });
          break;
        }
        case 7: {
          core::RoomPatch p;
          if (pick(2)) p.capacity = 1 + pick(4);
          if (pick(3) == 0) p.grace_ms = 500 + pick(3) * 1000;
          if (pick(3) == 0) p.checkin_timeout_ms = 1000 + pick(3) * 1000;
          if (pick(4) == 0) {
            p.admit_per_minute = pick(2) ? std::optional<int64_t>(2 + pick(3)) : std::nullopt;
          }
          auto maybe = [&](int64_t lo, int64_t n) {
            return pick(3) ? std::optional<int64_t>(lo + pick(static_cast<int>(n))) : std::nullopt;
          };
          if (pick(3) == 0) p.joins_per_minute_per_client = maybe(1, 7);
          if (pick(3) == 0) p.places_per_client = maybe(1, 3);
          if (pick(6) == 0) p.challenge_difficulty = maybe(1, 3);
          if (pick(3) == 0) p.notify_at_position = maybe(1, 4);
          if (pick(4) == 0) {
            p.gate.emplace();  // set (one of two texts, or empty) or cleared
            if (pick(3))
              *p.gate = pick(2) ? R"({"cookie":"g)" + std::to_string(pick(2)) + "\"}" : "";
          }
          if (pick(4) == 0) {
            p.page.emplace();  // set (one of two texts, or empty) or cleared, apart from the gate
            if (pick(3))
              *p.page = pick(2) ? R"({"title":"p)" + std::to_string(pick(2)) + "\"}" : "";
          }
          (void)same("put", [&](Backend& b) {
            return Wait<core::RoomInfo>([&](auto done) { b.PutRoom(r, p, done); });
          });
          break;
        }
        case 8:
        case 9: {
          std::vector<core::JobSpec> jobs(1 + pick(3));
          for (auto& j : jobs) {
            j.payload = "p" + std::to_string(pick(1000));
            j.priority = pick(3) - 1;
            j.delay_ms = pick(3) == 0 ? 500 + 100 * pick(20) : 0;
            if (pick(4) == 0) j.dedupe_key = "k" + std::to_string(pick(5));
            j.max_attempts = 1 + pick(3);
            // A few groups, and often none: names that sort apart from their case and length.
            const char* groups[] = {"", "", "ga", "gB", "g", "g-c"};
            j.group = groups[pick(6)];
            // Dependencies on recent jobs (some not yet pushed, some repeated), and batches.
            if (pick(3) == 0) {
              for (int k = pick(3); k >= 0; --k) j.depends_on.push_back(recent_id(q));
              j.ignore_failed_dependencies = pick(3) == 0;
            }
            if (pick(4) == 0) j.batch = "b" + std::to_string(pick(3));
          }
          auto pushed = same("push", [&](Backend& b) {
            return Wait<std::vector<core::PushResult>>([&](auto done) { b.Push(q, jobs, done); });
          });
          if (pushed.ok()) {
            for (const auto& p : *pushed) newest[q] = std::max(newest[q], static_cast<int>(p.id));
          }
          break;
        }
        case 10:
        case 11: {
          core::FetchRequest f{
              w, static_cast<size_t>(1 + pick(3)), 500 + 100 * pick(30), 0, {}, {}, false, {}};
          if (!leases.empty() && pick(2)) {
            f.ack.push_back(leases[pick(static_cast<int>(leases.size()))]);
            if (pick(2))
              f.ack_results.push_back(pick(3) ? "[" + std::to_string(pick(9)) + "]" : "");
          }
          f.reclaim = pick(6) == 0;  // a worker starting again under its name
          auto a = same(f.reclaim ? "fetch reclaim" : "fetch", [&](Backend& b) {
            return Wait<core::FetchAnswer>([&](auto done) { b.Fetch(q, f, done); });
          });
          if (a.ok()) {
            for (const auto& d : a->jobs) {
              leases.push_back(d.lease);
              leases_of[q].push_back(d.lease);
            }
          }
          break;
        }
        case 12:
        case 13:
        case 14: {
          if (leases.empty()) break;
          std::vector<std::string> some{leases[pick(static_cast<int>(leases.size()))]};
          // An ack mostly of one of the queue's latest deliveries, so that many are genuine.
          const std::vector<std::string>& mine = leases_of[q];
          if (op == 12 && !mine.empty() && pick(3) != 0) {
            some[0] = mine[mine.size() - 1 - pick(std::min<int>(3, static_cast<int>(mine.size())))];
          }
          if (pick(5) == 0) some.push_back("1.1.forged");
          if (op == 12) {
            // Results for some acks, none for others ("" and no list alike).
            std::vector<std::string> results;
            if (pick(2)) {
              for (size_t k = 0; k < some.size(); ++k) {
                results.push_back(pick(4) ? R"({"r":)" + std::to_string(pick(99)) + "}" : "");
              }
            }
            (void)same("ack", [&](Backend& b) {
              return Wait<std::vector<core::LeaseOutcome>>(
                  [&](auto done) { b.Ack(q, some, results, done); });
            });
          } else if (op == 13) {
            int64_t delay = pick(2) ? 0 : 700;
            (void)same("nack", [&](Backend& b) {
              return Wait<std::vector<core::LeaseOutcome>>(
                  [&](auto done) { b.Nack(q, some, delay, "boom", done); });
            });
          } else {
            int64_t ms = 300 + 100 * pick(30);
            (void)same("extend", [&](Backend& b) {
              return Wait<std::vector<core::LeaseOutcome>>(
                  [&](auto done) { b.Extend(q, some, ms, done); });
            });
          }
          break;
        }
        case 15: {
          int64_t ttl = 800 + 100 * pick(20);
          (void)same("heartbeat", [&](Backend& b) {
            return Wait<Done>([&](auto done) { b.Heartbeat(q, w, ttl, done); });
          });
          break;
        }
        case 16:
          if (pick(3) == 0) {
            (void)same("release", [&](Backend& b) {
              return Wait<size_t>([&](auto done) { b.ReleaseWorker(q, w, done); });
            });
          } else {
            core::JobId id = static_cast<core::JobId>(1 + pick(30));
            (void)same("cancel", [&](Backend& b) {
              return Wait<core::CancelOutcome>([&](auto done) { b.Cancel(q, id, done); });
            });
          }
          break;
        case 17:
          if (pick(2)) {
            (void)same("requeue", [&](Backend& b) {
              return Wait<size_t>([&](auto done) { b.RequeueDead(q, std::nullopt, done); });
            });
          } else {
            bool paused = pick(3) == 0;
            (void)same("pause", [&](Backend& b) {
              return Wait<Done>([&](auto done) { b.SetPaused(q, paused, done); });
            });
          }
          break;
        case 18:
          (void)same("stats", [&](Backend& b) {
            return Wait<core::QueueStats>([&](auto done) { b.GetQueue(q, done); });
          });
          (void)same("inflight", [&](Backend& b) {
            return Wait<std::vector<core::InflightJob>>(
                [&](auto done) { b.Inflight(q, std::nullopt, done); });
          });
          (void)same("dead", [&](Backend& b) {
            return Wait<std::vector<core::DeadJob>>([&](auto done) { b.Dead(q, 100, done); });
          });
          break;
        case 19:
          if (pick(3) == 0) {
            (void)same("rooms", [&](Backend& b) {
              auto listed =
                  Wait<std::vector<core::RoomInfo>>([&](auto done) { b.ListRooms(done); });
              if (!listed.ok()) return OpResult<std::vector<std::string>>(listed.status(), "");
              std::vector<std::string> out;
              for (const auto& info : *listed) out.push_back("[" + Show(info) + "]");
              return OpResult<std::vector<std::string>>(std::move(out));
            });
          } else {
            (void)same("room", [&](Backend& b) {
              return Wait<core::RoomInfo>([&](auto done) { b.GetRoom(r, done); });
            });
          }
          break;
        case 20: {
          // Pause (less often than resume, so the rooms mostly admit), maybe with a target URL.
          core::RoomPatch p;
          p.paused = pick(5) < 2;
          if (pick(3) == 0) {
            p.target_url.emplace();
            if (pick(2)) *p.target_url = "/in/" + std::to_string(pick(10));
          }
          (void)same(*p.paused ? "pause" : "resume", [&](Backend& b) {
            return Wait<core::RoomInfo>([&](auto done) { b.PutRoom(r, p, done); });
          });
          break;
        }
        case 26: {
          // A queue's own key set (two digests), removed, or read: a key keeps a queue that
          // holds nothing else (heartbeats there count), and its removal lets it go.
          std::optional<std::string> digest;
          if (pick(2)) digest = std::string(kQueueKeyDigestBytes, static_cast<char>('a' + pick(2)));
          if (pick(3) == 0) {
            (void)same("getkey", [&](Backend& b) {
              return Wait<std::optional<std::string>>([&](auto done) { b.GetQueueKey(q, done); });
            });
          } else {
            (void)same(digest ? "setkey" : "removekey", [&](Backend& b) {
              return Wait<Done>([&](auto done) { b.SetQueueKey(q, digest, done); });
            });
          }
          break;
        }
        case 27: {
          // A queueing method (random aside: see the top), with the brake's include_active.
          core::RoomPatch p;
          const core::QueueingMethod methods[] = {
              core::QueueingMethod::kFifo, core::QueueingMethod::kPassthrough,
              core::QueueingMethod::kReject, core::QueueingMethod::kQueueAll};
          p.queueing_method = methods[pick(4)];
          p.include_active = p.queueing_method == core::QueueingMethod::kQueueAll && pick(2) == 0;
          if (pick(3) == 0) p.capacity = 1 + pick(4);
          (void)same("method", [&](Backend& b) {
            return Wait<core::RoomInfo>([&](auto done) { b.PutRoom(r, p, done); });
          });
          break;
        }
        case 28:
        case 29: {
          // An event: a pre-queue (often), times a few seconds around now in 100 ms steps (so
          // some are refused: in the past, out of order, overlapping), overrides, a suspension.
          int64_t now = memory.NowMs();
          core::EventSpec e;
          e.name = "n" + std::to_string(pick(3));
          int64_t starts = now + 100 * (pick(40) - 5);
          if (pick(4) != 0) e.prequeue_at = starts - 100 * pick(20);
          e.starts_at = starts;
          e.ends_at = starts + 100 * (pick(40) - 2);
          e.prequeue_scope = pick(3) == 0 ? core::PrequeueScope::kAll : core::PrequeueScope::kNew;
          e.suspended = pick(6) == 0;
          if (pick(3) == 0) e.overrides.capacity = 1 + pick(4);
          if (pick(5) == 0) e.overrides.admit_per_minute = 2 + pick(3);
          if (pick(5) == 0) e.overrides.grace_ms = 500 + 500 * pick(3);
          if (pick(5) == 0) e.overrides.checkin_timeout_ms = 1000 + 1000 * pick(3);
          if (pick(4) == 0) {
            const core::QueueingMethod methods[] = {core::QueueingMethod::kPassthrough,
                                                    core::QueueingMethod::kReject,
                                                    core::QueueingMethod::kQueueAll};
            e.overrides.queueing_method = methods[pick(3)];
          }
          if (pick(4) == 0)
            e.overrides.page = R"({"title":"drop )" + std::to_string(pick(9)) + "\"}";
          std::string id = "e" + std::to_string(pick(3));
          (void)same("event", [&](Backend& b) {
            return Wait<core::RoomEvent>([&](auto done) { b.PutEvent(r, id, e, done); });
          });
          break;
        }
        case 30:
          if (pick(3) == 0) {
            std::string id = "e" + std::to_string(pick(3));
            (void)same("cancel-event", [&](Backend& b) {
              return Wait<core::RoomEvent>([&](auto done) { b.DeleteEvent(r, id, done); });
            });
          } else {
            (void)same("events", [&](Backend& b) {
              return Wait<std::vector<core::RoomEvent>>([&](auto done) { b.ListEvents(r, done); });
            });
          }
          break;
        case 31: {
          // Passes of either kind, some that expire within a few seconds.
          core::PassMint mint{.kind = pick(2) ? core::PassKind::kAdmit : core::PassKind::kFront,
                              .uses = 1 + pick(3),
                              .expires_at = std::nullopt,
                              .count = 1 + pick(3)};
          if (pick(3) == 0) mint.expires_at = memory.NowMs() + 100 * pick(30);
          (void)same("mint", [&](Backend& b) {
            auto r = Wait<std::vector<core::MintedPass>>(
                [&](auto done) { b.MintPasses(r_now, mint, done); });
            if (r.ok()) {
              for (const auto& m : *r) passes_of(b)[r_now].push_back({m.pass.id, m.code});
            }
            return r;
          });
          break;
        }
        case 32:
        case 33: {
          // A check that carries the k-th pass of the room: its code, or a wrong one.
          core::Arrival arrival{.client = pick(6) == 0 ? "" : "c" + std::to_string(pick(5)),
                                .proof_bits = pick(4)};
          // Mostly one of the last few minted, so passes get used up.
          size_t n = passes[0][r].size();
          size_t k =
              n == 0 ? 0
                     : n - 1 - static_cast<size_t>(pick(static_cast<int>(std::min<size_t>(n, 4))));
          int how = pick(10);  // 0: a wrong secret, 1: no pass at all by that id, else the code
          (void)same("redeem", [&](Backend& b) {
            auto& mine = passes_of(b)[r];
            core::Arrival a = arrival;
            if (how == 1 || mine.size() <= k) {
              a.pass = "nobody.secret";
            } else if (how == 0) {
              a.pass = mine[k].id + ".wrong";
            } else {
              a.pass = mine[k].code;
            }
            return Wait<core::SessionView>([&](auto done) { b.Check(r, s, a, done); });
          });
          break;
        }
        case 35: {
          // Limits small enough to bind often: per group and queue-wide rates (periods of a few
          // 100 ms steps, so their times fall between steps too) and concurrencies, either
          // fairness; sometimes the defaults back, sometimes read.
          if (pick(5) == 0) {
            (void)same("getsettings", [&](Backend& b) {
              return Wait<core::QueueSettings>([&](auto done) { b.GetQueueSettings(q, done); });
            });
            break;
          }
          core::QueueSettings set;
          // Keep few finished jobs, for little time, often: count and age both trim them.
          if (pick(2)) set.keep_acked = {.count = pick(5), .age_ms = 100 * (1 + pick(40))};
          if (pick(5) != 0) {
            core::QueueLimits& l = set.limits;
            l.fairness = pick(2) ? core::Fairness::kRoundRobin : core::Fairness::kFifo;
            auto rate = [&]() -> std::optional<core::RateLimit> {
              if (pick(2)) return std::nullopt;
              return core::RateLimit{.limit = 1 + pick(3),
                                     .period_ms = 100 * (1 + pick(10)) + (pick(3) == 0 ? 7 : 0),
                                     .burst = 1 + pick(3)};
            };
            l.per_group.rate = rate();
            l.per_group.concurrency = pick(2) ? 0 : 1 + pick(2);
            if (pick(2)) {
              l.queue.rate = rate();
              l.queue.concurrency = pick(2) ? 0 : 1 + pick(4);
            }
          }
          (void)same("setsettings", [&](Backend& b) {
            return Wait<Done>([&](auto done) { b.SetQueueSettings(q, set, done); });
          });
          break;
        }
        case 36: {
          // A worker told to slow down: its jobs wait without using up an attempt, and hold back
          // their group (an ungrouped job: the whole queue).
          // The queue's latest deliveries, mostly still current.
          const std::vector<std::string>& mine = leases_of[q];
          if (mine.empty()) break;
          auto recent = [&] {
            return mine[mine.size() - 1 - pick(std::min<int>(4, static_cast<int>(mine.size())))];
          };
          std::vector<std::string> some{recent()};
          if (pick(3) == 0) some.push_back(recent());
          if (pick(6) == 0) some.push_back("1.1.forged");
          int64_t delay = pick(3) == 0 ? 0 : 100 * (1 + pick(15));
          (void)same("snooze", [&](Backend& b) {
            return Wait<std::vector<core::LeaseOutcome>>(
                [&](auto done) { b.Snooze(q, some, delay, done); });
          });
          break;
        }
        case 37: {
          // Many fetches in a row (a worker loop), so that limits and turns decide the order.
          for (int k = 0; k < 3; ++k) {
            core::FetchRequest f{
                worker(), static_cast<size_t>(1 + pick(2)), 500 + 100 * pick(30), 0, {}, {}, false,
                {}};
            if (!leases.empty() && pick(2))
              f.ack.push_back(leases[pick(static_cast<int>(leases.size()))]);
            if (!f.ack.empty() && pick(2)) f.ack_results.push_back(std::to_string(pick(9)));
            auto a = same("fetch", [&](Backend& b) {
              return Wait<core::FetchAnswer>([&](auto done) { b.Fetch(q, f, done); });
            });
            if (a.ok()) {
              for (const auto& d : a->jobs) {
                leases.push_back(d.lease);
                leases_of[q].push_back(d.lease);
              }
            }
          }
          break;
        }
        case 34: {
          size_t n = passes[0][r].size();
          int what = pick(6);
          if (what == 0) {
            (void)same("revoke-all", [&](Backend& b) {
              return Wait<int64_t>([&](auto done) { b.RevokePasses(r, std::nullopt, done); });
            });
          } else if (what <= 2) {
            size_t k = n == 0 ? 0 : static_cast<size_t>(pick(static_cast<int>(n)));
            bool unknown = pick(5) == 0;
            (void)same("revoke", [&](Backend& b) {
              auto& mine = passes_of(b)[r];
              std::string id = unknown || mine.size() <= k ? "nope" : mine[k].id;
              auto revoked = Wait<int64_t>([&](auto done) { b.RevokePasses(r, id, done); });
              // A pass revoked before is named by its id: compared by its mint order.
              if (revoked.status() == OpStatus::kNotFound && id != "nope") {
                EXPECT_EQ(revoked.message(), wire::UnknownPass(id));
                return OpResult<int64_t>(OpStatus::kNotFound, fmt::format("pass #{}", k));
              }
              return revoked;
            });
          } else {
            // The list, each pass named by its mint order (ids differ), ordered by creation
            // then mint order (the order by id within a creation time is each backend's).
            (void)same("passes", [&](Backend& b) {
              auto listed =
                  Wait<std::vector<core::RoomPass>>([&](auto done) { b.ListPasses(r, done); });
              if (!listed.ok()) return OpResult<std::vector<std::string>>(listed.status(), "");
              auto& mine = passes_of(b)[r];
              // Each backend's own order: by creation, then id; and each pass's digest its code's.
              EXPECT_TRUE(std::is_sorted(listed->begin(), listed->end(),
                                         [](auto& x, auto& y) {
                                           return std::pair(x.created_at, x.id) <
                                                  std::pair(y.created_at, y.id);
                                         }))
                  << "op " << i_now;
              std::vector<std::pair<std::pair<int64_t, size_t>, std::string>> keyed;
              for (const auto& p : *listed) {
                size_t at = 0;
                while (at < mine.size() && mine[at].id != p.id) ++at;
                EXPECT_TRUE(at < mine.size() && p.digest == core::PassDigest(mine[at].code))
                    << "op " << i_now << " pass " << p.id;
                keyed.push_back({{p.created_at, at},
                                 fmt::format("#{} {} uses={} left={} expires={} created={}", at,
                                             core::ToString(p.kind), p.uses, p.uses_left,
                                             Show(p.expires_at), p.created_at)});
              }
              std::sort(keyed.begin(), keyed.end());
              std::vector<std::string> out;
              for (auto& [key, text] : keyed) out.push_back(std::move(text));
              return OpResult<std::vector<std::string>>(std::move(out));
            });
          }
          break;
        }
        case 38: {
          // Schedules on the two queues, some ids moving between them (refused): intervals of
          // a few seconds and cron by the second, so the steps below fire them often, with
          // every overlap and misfire policy, bounds, jitter and a delayed start.
          std::string id = "s" + std::to_string(pick(3));
          core::ScheduleSpec spec;
          spec.queue = q;
          if (pick(3) == 0) {
            spec.cron = pick(2) == 0 ? "*/2 * * * * *" : "1,4,5 * * * * *";
            spec.time_zone = pick(2) == 0 ? "UTC" : "Europe/Berlin";
          } else {
            spec.every_ms = 1000 * (1 + pick(4));
          }
          int64_t now = memory.NowMs();
          if (pick(3) == 0) spec.start_at_ms = now + 100 * pick(30);
          if (pick(4) == 0) spec.end_at_ms = now + 3000 + 100 * pick(100);
          if (pick(4) == 0) spec.max_runs = 1 + pick(6);
          spec.overlap = pick(2) == 0 ? core::Overlap::kAllow : core::Overlap::kSkip;
          spec.misfire.policy = static_cast<core::MisfirePolicy>(pick(3));
          spec.misfire.grace_ms = 100 * pick(20);
          spec.misfire.max_catchup = 1 + pick(4);
          if (pick(3) == 0) spec.jitter_ms = 100 * pick(20);
          spec.job.payload = "run of " + id;
          spec.job.priority = pick(3);
          spec.job.group = pick(3) == 0 ? "g" + std::to_string(pick(2)) : "";
          spec.job.max_attempts = 1 + pick(3);
          (void)same("put-schedule", [&](Backend& b) {
            return Wait<core::Schedule>([&](auto done) { b.PutSchedule(id, spec, done); });
          });
          break;
        }
        case 39: {
          std::string id = "s" + std::to_string(pick(4));  // s3: never put
          if (pick(3) == 0) {
            (void)same("get-schedule", [&](Backend& b) {
              return Wait<core::Schedule>([&](auto done) { b.GetSchedule(id, done); });
            });
          } else {
            bool paused = pick(2) == 0;
            (void)same(paused ? "pause-schedule" : "resume-schedule", [&](Backend& b) {
              return Wait<core::Schedule>([&](auto done) { b.PauseSchedule(id, paused, done); });
            });
          }
          break;
        }
        case 44:
        case 46: {
          // Batches: made with callbacks (which may wait on jobs, or die at once), sealed, read.
          std::string id = "b" + std::to_string(pick(3));
          int what = pick(3);
          if (what == 0) {
            core::BatchSpec spec;
            auto callback = [&](const char* name) {
              core::JobSpec j;
              j.payload = name;
              j.priority = pick(2);
              if (pick(4) == 0) j.depends_on.push_back(recent_id(q));
              return j;
            };
            if (pick(2)) spec.on_success = callback("success");
            if (pick(2)) spec.on_complete = callback("complete");
            if (pick(2)) spec.on_dead = callback("dead");
            (void)same("create-batch", [&](Backend& b) {
              return Wait<core::BatchView>([&](auto done) { b.CreateBatch(q, id, spec, done); });
            });
          } else if (what == 1) {
            (void)same("seal-batch", [&](Backend& b) {
              return Wait<core::BatchView>([&](auto done) { b.SealBatch(q, id, done); });
            });
          } else {
            (void)same("batch", [&](Backend& b) {
              return Wait<core::BatchView>([&](auto done) { b.GetBatch(q, id, done); });
            });
          }
          break;
        }
        case 45: {
          // A job's dependencies (its view, with what it waits on, is "getjobs"').
          core::JobId id = recent_id(q);
          (void)same("dependencies", [&](Backend& b) {
            return Wait<std::vector<core::DependencyView>>(
                [&](auto done) { b.GetJobDependencies(q, id, done); });
          });
          break;
        }
        case 40: {
          std::string id = "s" + std::to_string(pick(4));
          if (pick(4) == 0) {
            (void)same("delete-schedule", [&](Backend& b) {
              return Wait<core::Schedule>([&](auto done) { b.DeleteSchedule(id, done); });
            });
          } else {
            (void)same("schedules", [&](Backend& b) {
              return Wait<std::vector<core::Schedule>>([&](auto done) { b.ListSchedules(done); });
            });
          }
          break;
        }
        case 41: {
          // Every job wherever it is: pending, finished and kept, or unknown (never pushed, or
          // gone by keep_acked's count or age).
          (void)same("getjobs", [&](Backend& b) {
            std::vector<std::string> out;
            for (core::JobId id = 1; id <= 30; ++id) {
              out.push_back(
                  Describe(Wait<core::JobView>([&](auto done) { b.GetJob(q, id, done); })));
            }
            return OpResult<std::vector<std::string>>(std::move(out));
          });
          break;
        }
        case 42:
        case 43: {
          // Progress or log lines from one of the queue's latest deliveries (often still
          // current, some lost, some forged): lines cut at a character (a long one), and enough
          // of them that a log drops its oldest.
          const std::vector<std::string>& mine = leases_of[q];
          std::string lease = "1.1.forged";
          if (!mine.empty() && pick(8) != 0) {
            lease =
                pick(2)
                    ? mine.back()
                    : mine[mine.size() - 1 - pick(std::min<int>(3, static_cast<int>(mine.size())))];
          }
          if (op == 42) {
            std::string progress = R"({"done":)" + std::to_string(pick(100)) + "}";
            (void)same("progress", [&](Backend& b) {
              return Wait<core::LeaseOutcome>(
                  [&](auto done) { b.SetProgress(q, lease, progress, done); });
            });
            break;
          }
          std::vector<std::string> lines;
          int n = pick(3) == 0 ? 60 + pick(41) : 1 + pick(3);
          for (int k = 0; k < n; ++k) lines.push_back("l" + std::to_string(pick(1000)));
          if (pick(3) == 0) lines.back() = std::string(1000 + pick(50), 'x') + "\u00e9\u00e9";
          // Twice, sometimes: more lines than a log keeps.
          for (int k = pick(3) == 0 ? 2 : 1; k > 0; --k) {
            (void)same("joblog", [&](Backend& b) {
              return Wait<core::LeaseOutcome>(
                  [&](auto done) { b.AppendJobLog(q, lease, lines, done); });
            });
          }
          break;
        }
        default: {
          // Whole 100 ms steps, as every duration above: deadlines are often hit exactly.
          int64_t ms = pick(4) == 0 ? 2500 : 100 * pick(8);
          for (Harness* h : both) h->AdvanceTime(ms);
          // One turn of either backend's timer publishes a draw's chunk, and what waits behind
          // the draw (the event's end, another event's stages and draw) is the next turns' (a
          // server's timer comes straight back for what is already due, and its sweeper within
          // its interval). A few more turns of each reach the same place; with only the memory
          // backend's first, a join after a long step found a draw the Redis sweeps had done.
          auto& sweeper = static_cast<redis::RedisBackend&>(redis.backend());
          auto& timer = static_cast<MemoryBackend&>(memory.backend());
          for (int k = 0; k < 3; ++k) {
            timer.RunDue();
            sweeper.RunDue();
          }
          break;
        }
      }
    }
    // Both told the same lifecycle events: per room and queue the same ones in the same order,
    // with the same sequence numbers and times (the order across rooms is each sweeper's).
    auto& sweeper = static_cast<redis::RedisBackend&>(redis.backend());
    auto& timer = static_cast<MemoryBackend&>(memory.backend());
    for (int k = 0; k < 8; ++k) {
      timer.RunDue();
      sweeper.RunDue();
    }
    // Deadlines due at the same millisecond are taken in each backend's own tie order (the
    // embedded heap's slots, a Redis zset's member names): the events of one millisecond are
    // compared as a set, each within that run's range of sequence numbers (the order within a
    // millisecond is held by events_conformance_test.cc, where no deadlines tie).
    std::map<std::string, std::vector<std::string>> told[2];
    for (int k = 0; k < 2; ++k) {
      auto read = Wait<EventRead>([&](auto done) {
        both[k]->backend().ReadEvents(EventId{0, 0}, 1'000'000, done);
      });
      ASSERT_TRUE(read.ok()) << read.message();
      std::map<std::string, std::vector<const LifecycleEvent*>> by_owner;
      for (const LifecycleEvent& e : read->events) {
        by_owner[e.room.empty() ? "q:" + e.queue : "r:" + e.room].push_back(&e);
      }
      for (auto& [owner, events] : by_owner) {
        std::vector<std::string>& lines = told[k][owner];
        for (size_t from = 0; from < events.size();) {
          size_t to = from + 1;
          while (to < events.size() && events[to]->at_ms == events[from]->at_ms) {
            ++to;
          }
          std::vector<std::string> run;
          for (size_t j = from; j < to; ++j) {
            const LifecycleEvent& e = *events[j];
            // A pass's id is random per backend: which pass was used is compared by answers.
            std::string detail = e.type == "room.pass_used" ? "" : e.detail;
            run.push_back(fmt::format("{} {} at={} adm={} job={} pos={} '{}' seq {}..{}", e.type,
                                      e.session, e.at_ms, e.admission.value_or(0),
                                      e.job.value_or(0), e.position.value_or(0), detail,
                                      events[from]->seq, events[to - 1]->seq));
          }
          std::sort(run.begin(), run.end());
          lines.insert(lines.end(), run.begin(), run.end());
          from = to;
        }
      }
    }
    for (const auto& [owner, lines] : told[0]) {
      const std::vector<std::string>& other = told[1][owner];
      size_t k = 0;
      while (k < lines.size() && k < other.size() && lines[k] == other[k]) ++k;
      if (k < lines.size() || k < other.size()) {
        ADD_FAILURE() << owner << ": lifecycle events differ at the " << k
                      << "th\n memory: " << (k < lines.size() ? lines[k] : "(none)")
                      << "\n redis:  " << (k < other.size() ? other[k] : "(none)");
      }
    }
    EXPECT_EQ(told[0].size(), told[1].size()) << "rooms and queues with events";
  }
}

}  // namespace
}  // namespace anteroom::store::conformance
