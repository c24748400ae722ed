// GroupLine: which ready job a fetch takes when jobs carry groups, under fairness and limits.
// Unit tests with a fake clock, then a randomized model test against a reference that scans
// every ready job (deliberately simple: no parking, no keys, no rotation bookkeeping).

#include "core/group_line.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

// The queue's side: jobs in a slab with tickets and orders, as core::Queue keeps them.
struct Jobs {
  struct Job {
    GroupLine::GroupId group = 0;
    int32_t priority = 0;
    int64_t order = 0;
    uint64_t ticket = 0;  // 0: not ready
    bool inflight = false;
  };
  std::vector<Job> jobs;
  int64_t next_order = 0;
  int64_t head_order = -1;
  uint64_t next_ticket = 1;

  uint32_t Push(GroupLine& line, std::string_view group, int32_t priority, int64_t now,
                bool front = false) {
    uint32_t i = static_cast<uint32_t>(jobs.size());
    Job j;
    j.group = line.Ref(group);
    j.priority = priority;
    j.order = front ? head_order-- : next_order++;
    j.ticket = next_ticket++;
    jobs.push_back(j);
    if (front) {
      line.PushFront(j.group, i, priority, j.order, j.ticket, now);
    } else {
      line.PushBack(j.group, i, priority, j.order, j.ticket, now);
    }
    return i;
  }
  std::optional<uint32_t> Take(GroupLine& line, int64_t now) {
    auto i = line.Take(
        now, [&](uint32_t k, uint64_t t) { return k < jobs.size() && jobs[k].ticket == t; },
        [&](uint32_t k) { return jobs[k].order; });
    if (i) {
      jobs[*i].ticket = 0;
      jobs[*i].inflight = true;
    }
    return i;
  }
  void Finish(GroupLine& line, uint32_t i, int64_t now) {
    jobs[i].inflight = false;
    line.Finished(jobs[i].group, now);
    line.Unref(jobs[i].group);
  }
  void Cancel(GroupLine& line, uint32_t i, int64_t now) {
    jobs[i].ticket = 0;
    line.Forget(jobs[i].group, now);
    line.Unref(jobs[i].group);
  }
  std::string GroupOf(const GroupLine& line, uint32_t i) const { return line.Name(jobs[i].group); }
};

RateLimit Rate(int64_t limit, int64_t period_ms, int64_t burst) {
  return RateLimit{.limit = limit, .period_ms = period_ms, .burst = burst};
}

TEST(GroupLineTest, FifoTakesByPriorityThenOrderAcrossGroups) {
  GroupLine line;
  Jobs jobs;
  uint32_t a1 = jobs.Push(line, "a", 0, kT0);
  uint32_t b1 = jobs.Push(line, "b", 0, kT0);
  uint32_t a2 = jobs.Push(line, "a", 5, kT0);
  uint32_t u1 = jobs.Push(line, "", 0, kT0);
  uint32_t b0 = jobs.Push(line, "b", 0, kT0, /*front=*/true);
  EXPECT_EQ(line.size(), 5u);
  std::vector<uint32_t> got;
  while (auto i = jobs.Take(line, kT0)) got.push_back(*i);
  EXPECT_EQ(got, (std::vector<uint32_t>{a2, b0, a1, b1, u1}));
  EXPECT_TRUE(line.empty());
  EXPECT_EQ(line.inflight(), 5);
}

TEST(GroupLineTest, RoundRobinServesGroupsInTurnWhateverTheirSize) {
  GroupLine line;
  line.Configure({.fairness = Fairness::kRoundRobin, .per_group = {}, .queue = {}}, kT0);
  Jobs jobs;
  for (int i = 0; i < 1000; ++i) jobs.Push(line, "big", 0, kT0);
  for (int i = 0; i < 10; ++i) jobs.Push(line, "small", 0, kT0);
  for (int i = 0; i < 10; ++i) jobs.Push(line, "tiny", i % 2, kT0);
  std::map<std::string, int> first30;
  for (int k = 0; k < 30; ++k) first30[jobs.GroupOf(line, *jobs.Take(line, kT0))]++;
  EXPECT_EQ(first30["big"], 10);
  EXPECT_EQ(first30["small"], 10);
  EXPECT_EQ(first30["tiny"], 10);
}

TEST(GroupLineTest, WithinAGroupPriorityThenFifoUnderRoundRobin) {
  GroupLine line;
  line.Configure({.fairness = Fairness::kRoundRobin, .per_group = {}, .queue = {}}, kT0);
  Jobs jobs;
  uint32_t low = jobs.Push(line, "g", 0, kT0);
  uint32_t high = jobs.Push(line, "g", 9, kT0);
  uint32_t low2 = jobs.Push(line, "g", 0, kT0);
  EXPECT_EQ(jobs.Take(line, kT0), high);
  EXPECT_EQ(jobs.Take(line, kT0), low);
  EXPECT_EQ(jobs.Take(line, kT0), low2);
}

TEST(GroupLineTest, AGroupAtItsConcurrencyWaitsForOneOfItsJobsToFinish) {
  GroupLine line;
  line.Configure(
      {.fairness = Fairness::kFifo, .per_group = {.rate = {}, .concurrency = 2}, .queue = {}}, kT0);
  Jobs jobs;
  for (int i = 0; i < 4; ++i) jobs.Push(line, "a", 0, kT0);
  uint32_t b = jobs.Push(line, "b", 0, kT0);
  uint32_t u = jobs.Push(line, "", 0, kT0);
  uint32_t a0 = *jobs.Take(line, kT0);
  jobs.Take(line, kT0);
  // "a" holds 2 in flight: b and the ungrouped job (exempt from group limits) come next.
  EXPECT_EQ(jobs.Take(line, kT0), b);
  EXPECT_EQ(jobs.Take(line, kT0), u);
  EXPECT_FALSE(jobs.Take(line, kT0));
  EXPECT_FALSE(line.CanTake(kT0));
  EXPECT_EQ(line.NextAllowedAt(kT0), INT64_MAX) << "only a finish frees it";
  EXPECT_EQ(line.size(), 2u) << "held back, not taken: no attempt used";
  jobs.Finish(line, a0, kT0 + 5);
  EXPECT_TRUE(line.CanTake(kT0 + 5));
  EXPECT_TRUE(jobs.Take(line, kT0 + 5));
  EXPECT_FALSE(jobs.Take(line, kT0 + 5));
  EXPECT_EQ(line.inflight(line.Ref("a")), 2);
}

TEST(GroupLineTest, AGroupOverItsRateIsParkedUntilItsNextSlot) {
  GroupLine line;
  line.Configure({.fairness = Fairness::kFifo,
                  .per_group = {.rate = Rate(2, 1000, 1), .concurrency = 0},
                  .queue = {}},
                 kT0);
  Jobs jobs;
  for (int i = 0; i < 3; ++i) jobs.Push(line, "a", 0, kT0);
  EXPECT_TRUE(jobs.Take(line, kT0));
  EXPECT_FALSE(line.CanTake(kT0 + 499));
  EXPECT_EQ(line.NextAllowedAt(kT0 + 1), kT0 + 500);
  EXPECT_FALSE(jobs.Take(line, kT0 + 499));
  uint32_t b = jobs.Push(line, "b", 0, kT0 + 499);
  EXPECT_EQ(line.NextAllowedAt(kT0 + 499), kT0 + 499) << "b may go now";
  EXPECT_EQ(jobs.Take(line, kT0 + 499), b);
  EXPECT_TRUE(line.CanTake(kT0 + 500));
  EXPECT_TRUE(jobs.Take(line, kT0 + 500));
  EXPECT_FALSE(jobs.Take(line, kT0 + 500));
  EXPECT_EQ(line.NextAllowedAt(kT0 + 500), kT0 + 1000);
}

TEST(GroupLineTest, QueueWideLimitsHoldEveryGroup) {
  GroupLine line;
  line.Configure({.fairness = Fairness::kRoundRobin,
                  .per_group = {},
                  .queue = {.rate = Rate(10, 1000, 2), .concurrency = 3}},
                 kT0);
  Jobs jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.Push(line, "a", 0, kT0);
    jobs.Push(line, "", 0, kT0);
  }
  uint32_t first = *jobs.Take(line, kT0);
  EXPECT_TRUE(jobs.Take(line, kT0));
  EXPECT_FALSE(jobs.Take(line, kT0)) << "burst 2";
  EXPECT_EQ(line.NextAllowedAt(kT0), kT0 + 100);
  EXPECT_TRUE(jobs.Take(line, kT0 + 100));
  EXPECT_FALSE(jobs.Take(line, kT0 + 1000)) << "3 in flight";
  EXPECT_EQ(line.NextAllowedAt(kT0 + 1000), INT64_MAX);
  jobs.Finish(line, first, kT0 + 1000);
  EXPECT_TRUE(jobs.Take(line, kT0 + 1000));
}

TEST(GroupLineTest, CancelledJobsLeaveNoTraceInTheChoice) {
  GroupLine line;
  Jobs jobs;
  uint32_t a = jobs.Push(line, "a", 0, kT0);
  uint32_t b = jobs.Push(line, "b", 0, kT0);
  jobs.Cancel(line, a, kT0);
  EXPECT_EQ(line.size(), 1u);
  EXPECT_EQ(jobs.Take(line, kT0), b);
  EXPECT_FALSE(line.CanTake(kT0));
  EXPECT_FALSE(jobs.Take(line, kT0));
}

TEST(GroupLineTest, AGroupIsForgottenOnlyWhenItHasNoJobAndItsRateOwesNothing) {
  GroupLine line;
  line.Configure({.fairness = Fairness::kFifo,
                  .per_group = {.rate = Rate(1, 1000, 1), .concurrency = 0},
                  .queue = {}},
                 kT0);
  Jobs jobs;
  jobs.Push(line, "a", 0, kT0);
  uint32_t i = *jobs.Take(line, kT0);
  jobs.Finish(line, i, kT0 + 10);
  EXPECT_EQ(line.groups(), 2u);  // "" and "a"
  line.Sweep(kT0 + 10);
  EXPECT_EQ(line.groups(), 2u) << "a's rate still owes: forgetting it would give a fresh burst";
  jobs.Push(line, "a", 0, kT0 + 20);
  EXPECT_FALSE(jobs.Take(line, kT0 + 20)) << "the same group, its rate remembered";
  line.Sweep(kT0 + 20);
  EXPECT_EQ(line.groups(), 2u);
  jobs.Finish(line, *jobs.Take(line, kT0 + 1000), kT0 + 1000);
  line.Sweep(kT0 + 1999);
  EXPECT_EQ(line.groups(), 2u);
  line.Sweep(kT0 + 2000);
  EXPECT_EQ(line.groups(), 1u);
}

// A sweep looks at a few groups a call, so a queue touched on every request does not walk all of
// its idle groups each time; every group still comes round.
TEST(GroupLineTest, ASweepIsBoundedAndEveryIdleGroupIsForgottenInTime) {
  GroupLine line;
  std::vector<GroupLine::GroupId> ids;
  for (int g = 0; g < 100; ++g) ids.push_back(line.Ref("tenant-" + std::to_string(g)));
  for (GroupLine::GroupId g : ids) line.Unref(g);
  EXPECT_EQ(line.groups(), 101u);  // with the ungrouped jobs' group
  line.Sweep(kT0);
  EXPECT_EQ(line.groups(), 101u - 16u);
  for (int k = 0; k < 6; ++k) line.Sweep(kT0);
  EXPECT_EQ(line.groups(), 1u);
}

TEST(GroupLineTest, AForgottenGroupsPlaceInTheRotationIsNotInheritedByTheNextGroup) {
  GroupLine line;
  line.Configure({.fairness = Fairness::kRoundRobin, .per_group = {}, .queue = {}}, kT0);
  Jobs jobs;
  for (int i = 0; i < 3; ++i) jobs.Push(line, "a", 0, kT0);
  uint32_t x = jobs.Push(line, "x", 0, kT0);
  for (int i = 0; i < 3; ++i) jobs.Push(line, "b", 0, kT0);
  jobs.Cancel(line, x, kT0);  // x leaves the choice; its turn, listed after a's, is stale
  line.Sweep(kT0);
  for (int i = 0; i < 3; ++i) jobs.Push(line, "y", 0, kT0);
  std::string order;
  for (int k = 0; k < 6; ++k) order += jobs.GroupOf(line, *jobs.Take(line, kT0));
  EXPECT_EQ(order, "abyaby");
}

TEST(GroupLineTest, NewSettingsApplyToGroupsAlreadyWaiting) {
  GroupLine line;
  Jobs jobs;
  for (int i = 0; i < 3; ++i) jobs.Push(line, "a", 0, kT0);
  jobs.Take(line, kT0);
  line.Configure(
      {.fairness = Fairness::kRoundRobin, .per_group = {.rate = {}, .concurrency = 1}, .queue = {}},
      kT0);
  EXPECT_FALSE(jobs.Take(line, kT0)) << "a already has one in flight";
  line.Configure({}, kT0);
  EXPECT_TRUE(jobs.Take(line, kT0));
}

// ---- the model test ---------------------------------------------------------------------

// What may be taken, found by scanning every job: each group's limits from its own count of
// jobs in flight and its own GCRA (core::Gcra, checked on its own in rate_limit_test).
struct Reference {
  QueueLimits settings;
  std::map<std::string, int64_t> inflight;
  std::map<std::string, Gcra> rates;
  int64_t queue_inflight = 0;
  Gcra queue_rate;

  bool GroupHeld(const std::string& g, int64_t now) {
    if (g.empty()) return false;
    const JobLimits& l = settings.per_group;
    if (l.concurrency > 0 && inflight[g] >= l.concurrency) return true;
    return l.rate && !rates[g].Allows(*l.rate, now);
  }
  bool QueueHeld(int64_t now) const {
    const JobLimits& l = settings.queue;
    if (l.concurrency > 0 && queue_inflight >= l.concurrency) return true;
    return l.rate && !queue_rate.Allows(*l.rate, now);
  }
  // Groups with a ready job that may go now.
  std::vector<std::string> Eligible(const Jobs& jobs, const GroupLine& line, int64_t now) {
    std::vector<std::string> out;
    if (QueueHeld(now)) return out;
    for (const Jobs::Job& j : jobs.jobs) {
      if (j.ticket == 0) continue;
      std::string g = line.Name(j.group);
      if (!GroupHeld(g, now) && std::find(out.begin(), out.end(), g) == out.end()) {
        out.push_back(g);
      }
    }
    return out;
  }
  // The first ready job of group g (or of every eligible group when g is null) in delivery order.
  std::optional<uint32_t> First(const Jobs& jobs, const GroupLine& line,
                                const std::vector<std::string>& groups) {
    std::optional<uint32_t> best;
    for (uint32_t i = 0; i < jobs.jobs.size(); ++i) {
      const Jobs::Job& j = jobs.jobs[i];
      if (j.ticket == 0) continue;
      if (std::find(groups.begin(), groups.end(), line.Name(j.group)) == groups.end()) continue;
      if (!best || j.priority > jobs.jobs[*best].priority ||
          (j.priority == jobs.jobs[*best].priority && j.order < jobs.jobs[*best].order)) {
        best = i;
      }
    }
    return best;
  }
  void Took(const std::string& g, int64_t now) {
    ++inflight[g];
    ++queue_inflight;
    if (settings.queue.rate) queue_rate.Take(*settings.queue.rate, now);
    if (!g.empty() && settings.per_group.rate) rates[g].Take(*settings.per_group.rate, now);
  }
  void Configure(const QueueLimits& s) {
    for (auto& [g, r] : rates) {
      if (settings.per_group.rate && s.per_group.rate) {
        r.Rescale(*settings.per_group.rate, *s.per_group.rate);
      } else if (!s.per_group.rate) {
        r = Gcra{};
      }
    }
    if (settings.queue.rate && s.queue.rate) {
      queue_rate.Rescale(*settings.queue.rate, *s.queue.rate);
    } else if (!s.queue.rate) {
      queue_rate = Gcra{};
    }
    settings = s;
  }
};

QueueLimits RandomSettings(std::mt19937_64& rng) {
  QueueLimits s;
  s.fairness = rng() % 2 ? Fairness::kFifo : Fairness::kRoundRobin;
  auto limits = [&](int64_t conc_max) {
    JobLimits l;
    if (rng() % 2) {
      l.rate = Rate(1 + static_cast<int64_t>(rng() % 5), 10 + static_cast<int64_t>(rng() % 500),
                    1 + static_cast<int64_t>(rng() % 3));
    }
    if (rng() % 2) l.concurrency = 1 + static_cast<int64_t>(rng() % conc_max);
    return l;
  };
  s.per_group = limits(3);
  if (rng() % 3 == 0) s.queue = limits(8);
  return s;
}

// Every take is the reference's: under kFifo the very job; under kRoundRobin a job of an
// eligible group, the first of its group, and none while one is eligible is never answered.
// Round robin's turns: while two groups both stay eligible, neither gets two takes in a row of
// the other's none (checked over each stretch in which the set of eligible groups is unchanged).
TEST(GroupLineModelTest, TakesWhatTheReferenceAllowsAndNeverExceedsALimit) {
  std::mt19937_64 rng(31);
  const char* names[] = {"", "a", "b", "c", "d", "e"};
  for (int round = 0; round < 300; ++round) {
    GroupLine line;
    Jobs jobs;
    Reference ref;
    QueueLimits s = RandomSettings(rng);
    line.Configure(s, kT0);
    ref.Configure(s);
    int64_t now = kT0;
    std::vector<uint32_t> inflight;
    std::map<std::string, std::vector<int64_t>> taken_at;  // per group, for the rate bound
    std::vector<std::string> stretch_groups;
    std::map<std::string, int> stretch_count;
    for (int step = 0; step < 400; ++step) {
      int op = static_cast<int>(rng() % 10);
      if (op < 3) {
        jobs.Push(line, names[rng() % 6], static_cast<int32_t>(rng() % 3), now, rng() % 5 == 0);
      } else if (op < 6) {
        std::vector<std::string> eligible = ref.Eligible(jobs, line, now);
        ASSERT_EQ(line.CanTake(now), !eligible.empty()) << "round " << round << " step " << step;
        std::sort(eligible.begin(), eligible.end());
        if (eligible != stretch_groups) {
          stretch_groups = eligible;
          stretch_count.clear();
        }
        std::optional<uint32_t> want = ref.First(jobs, line, eligible);
        std::map<std::string, uint32_t> first_of;
        for (const std::string& e : eligible) first_of[e] = *ref.First(jobs, line, {e});
        std::optional<uint32_t> got = jobs.Take(line, now);
        ASSERT_EQ(got.has_value(), want.has_value()) << "round " << round << " step " << step;
        if (!got) continue;
        std::string g = jobs.GroupOf(line, *got);
        if (ref.settings.fairness == Fairness::kFifo) {
          ASSERT_EQ(*got, *want) << "round " << round << " step " << step << ": got group " << g
                                 << " p" << jobs.jobs[*got].priority << " o"
                                 << jobs.jobs[*got].order << ", want group "
                                 << jobs.GroupOf(line, *want) << " p" << jobs.jobs[*want].priority
                                 << " o" << jobs.jobs[*want].order;
        } else {
          ASSERT_TRUE(first_of.contains(g)) << "round " << round << ": " << g << " not eligible";
          ASSERT_EQ(*got, first_of[g]) << "round " << round << ": not the first of its group";
        }
        ++stretch_count[g];
        if (ref.settings.fairness == Fairness::kRoundRobin) {
          for (const auto& [other, n] : stretch_count) {
            ASSERT_LE(stretch_count[g] - n, 2) << "round " << round << ": " << g << " vs " << other;
          }
        }
        ref.Took(g, now);
        // A take never goes past a concurrency (one lowered below what is in flight takes
        // nothing back, so this is checked as each job is taken).
        if (!g.empty() && ref.settings.per_group.concurrency > 0) {
          ASSERT_LE(ref.inflight[g], ref.settings.per_group.concurrency) << "round " << round;
        }
        if (ref.settings.queue.concurrency > 0) {
          ASSERT_LE(ref.queue_inflight, ref.settings.queue.concurrency) << "round " << round;
        }
        taken_at[g].push_back(now);
        inflight.push_back(*got);
      } else if (op < 8 && !inflight.empty()) {
        size_t k = rng() % inflight.size();
        uint32_t i = inflight[k];
        inflight.erase(inflight.begin() + static_cast<std::ptrdiff_t>(k));
        --ref.inflight[jobs.GroupOf(line, i)];
        --ref.queue_inflight;
        jobs.Finish(line, i, now);
      } else if (op == 8) {
        now += static_cast<int64_t>(rng() % 300);
        line.Sweep(now);
      } else if (rng() % 10 == 0) {
        QueueLimits next = RandomSettings(rng);
        line.Configure(next, now);
        ref.Configure(next);
        taken_at.clear();  // the bound holds per setting
        stretch_groups.clear();
        stretch_count.clear();
      } else {
        for (uint32_t i = 0; i < jobs.jobs.size(); ++i) {
          if (jobs.jobs[i].ticket != 0 && rng() % 4 == 0) {
            jobs.Cancel(line, i, now);
            break;
          }
        }
      }
    }
    if (const auto& rate = ref.settings.per_group.rate) {
      for (const auto& [g, at] : taken_at) {
        if (g.empty()) continue;
        for (size_t i = 0; i < at.size(); ++i) {
          for (size_t j = i; j < at.size(); ++j) {
            ASSERT_LE((static_cast<int64_t>(j - i + 1) - rate->burst) * rate->period_ms,
                      (at[j] - at[i]) * rate->limit)
                << "round " << round << " group " << g;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace anteroom::core
