#include "core/group_line.h"

#include <algorithm>

namespace anteroom::core {

GroupLine::GroupLine() {
  groups_.emplace_back();  // kUngrouped, named ""
  by_name_.emplace("", kUngrouped);
}

GroupLine::GroupId GroupLine::Ref(std::string_view group) {
  auto it = by_name_.find(std::string(group));
  GroupId g;
  if (it != by_name_.end()) {
    g = it->second;
  } else {
    if (!free_groups_.empty()) {
      g = free_groups_.back();
      free_groups_.pop_back();
      groups_[g] = Group{};
    } else {
      g = static_cast<GroupId>(groups_.size());
      groups_.emplace_back();
    }
    groups_[g].name = std::string(group);
    by_name_.emplace(std::string(group), g);
  }
  ++groups_[g].refs;
  return g;
}

void GroupLine::Unref(GroupId g) {
  if (--groups_[g].refs == 0 && g != kUngrouped) unreferenced_.push_back(g);
}

// A group with no job left owes its rate until TAT: forgetting it sooner would hand it a fresh
// burst, past the bound. Until then it stays (and is looked at again by a later Sweep).
// Looks at no more than kSweepBatch groups a call: a queue touched on every request must not
// walk 100,000 groups whose rates still owe on each of them; each group comes round again.
void GroupLine::Sweep(int64_t now) {
  constexpr size_t kSweepBatch = 16;
  for (size_t n = std::min(unreferenced_.size(), kSweepBatch); n > 0; --n) {
    GroupId g = unreferenced_.front();
    unreferenced_.pop_front();
    Group& group = groups_[g];
    if (group.refs > 0 || group.name.empty()) continue;  // taken again, or already free
    // Its id is not reused while rotation_ still lists it (that entry would serve the next
    // group given the id a second turn).
    if (!group.rate.Idle(now) || group.held_until > now || group.in_rotation) {
      unreferenced_.push_back(g);
      continue;
    }
    by_name_.erase(group.name);
    groups_[g] = Group{};  // an empty name with no refs: free
    free_groups_.push_back(g);
  }
}

bool GroupLine::QueueAllows(int64_t now) const {
  const JobLimits& q = settings_.queue;
  if (q.concurrency > 0 && inflight_ >= q.concurrency) return false;
  if (now < queue_held_until_) return false;
  return !q.rate || queue_rate_.Allows(*q.rate, now);
}

int64_t GroupLine::GroupAllowedAt(GroupId g, int64_t now) const {
  if (!Limited(g)) return now;
  const Group& group = groups_[g];
  const JobLimits& limits = settings_.per_group;
  int64_t at = now;
  if (limits.rate && !group.rate.Allows(*limits.rate, now)) {
    at = group.rate.AllowedAtMs(*limits.rate, now);
  }
  return std::max(at, group.held_until);
}

void GroupLine::Activate(GroupId g, Key key) {
  Group& group = groups_[g];
  if (group.active) return;
  group.active = true;
  ++active_;
  if (settings_.fairness == Fairness::kFifo) {
    group.key = key;
    fifo_.insert(key);
  } else if (!group.in_rotation) {
    group.in_rotation = true;
    rotation_.push_back(g);
  }
}

void GroupLine::Deactivate(GroupId g) {
  Group& group = groups_[g];
  if (!group.active) return;
  group.active = false;
  --active_;
  if (settings_.fairness == Fairness::kFifo) fifo_.erase(group.key);
  // kRoundRobin: its entry in rotation_ stays, and is passed over (ChooseInTurn).
}

void GroupLine::RateUnpark(GroupId g) {
  Group& group = groups_[g];
  if (group.rate_parked_until == kNotParked) return;
  rate_parked_.erase({group.rate_parked_until, g});
  group.rate_parked_until = kNotParked;
}

void GroupLine::Reassess(GroupId g, int64_t now, std::optional<Key> head) {
  Group& group = groups_[g];
  const JobLimits& limits = settings_.per_group;
  group.parked_conc = Limited(g) && limits.concurrency > 0 && group.inflight >= limits.concurrency;
  if (group.parked_conc || group.line.empty()) {
    RateUnpark(g);
    return Deactivate(g);
  }
  if (int64_t at = GroupAllowedAt(g, now); at > now) {
    if (group.rate_parked_until != at) {
      RateUnpark(g);
      group.rate_parked_until = at;
      rate_parked_.insert({at, g});
    }
    return Deactivate(g);
  }
  RateUnpark(g);
  // Coming back, its head is not known here (a job just placed need not lead the others): a
  // key before every job's, which ChooseFifo corrects when it leads.
  if (!group.active) return Activate(g, Key{std::numeric_limits<int64_t>::min(), 0, g});
  if (settings_.fairness == Fairness::kFifo && head && *head < group.key) {
    auto node = fifo_.extract(group.key);
    node.value() = group.key = *head;
    fifo_.insert(std::move(node));
  }
}

void GroupLine::Push(GroupId g, int32_t priority, int64_t order, int64_t now) {
  ++size_;
  Reassess(g, now, KeyOf(priority, order, g));
}

void GroupLine::PushBack(GroupId g, Index i, int32_t priority, int64_t order, uint64_t ticket,
                         int64_t now) {
  groups_[g].line.PushBack(i, priority, ticket);
  Push(g, priority, order, now);
}

void GroupLine::PushFront(GroupId g, Index i, int32_t priority, int64_t order, uint64_t ticket,
                          int64_t now) {
  groups_[g].line.PushFront(i, priority, ticket);
  Push(g, priority, order, now);
}

void GroupLine::Forget(GroupId g, int64_t now) {
  groups_[g].line.Forget();
  --size_;
  if (groups_[g].line.empty()) Reassess(g, now);
}

bool GroupLine::TakeThis(GroupId g, int64_t now) {
  if (!QueueAllows(now)) return false;
  Group& group = groups_[g];
  if (group.parked_conc || GroupAllowedAt(g, now) > now) return false;
  const JobLimits& limits = settings_.per_group;
  if (Limited(g) && limits.concurrency > 0 && group.inflight >= limits.concurrency) return false;
  group.line.Forget();
  --size_;
  Took(g, now, /*in_turn=*/false);
  return true;
}

void GroupLine::Hold(GroupId g, int64_t until, int64_t now) {
  if (g == kUngrouped) {
    queue_held_until_ = std::max(queue_held_until_, until);
    return;
  }
  groups_[g].held_until = std::max(groups_[g].held_until, until);
  Reassess(g, now);
}

void GroupLine::Finished(GroupId g, int64_t now) {
  Group& group = groups_[g];
  if (group.inflight > 0) --group.inflight;
  if (inflight_ > 0) --inflight_;
  if (group.parked_conc) Reassess(g, now);
}

void GroupLine::Unpark(int64_t now) {
  while (!rate_parked_.empty() && rate_parked_.begin()->first <= now) {
    GroupId g = rate_parked_.begin()->second;
    RateUnpark(g);
    Reassess(g, now);
  }
}

std::optional<GroupLine::GroupId> GroupLine::ChooseInTurn() {
  while (!rotation_.empty()) {
    GroupId g = rotation_.front();
    if (groups_[g].active) return g;
    rotation_.pop_front();
    groups_[g].in_rotation = false;
  }
  return std::nullopt;
}

// After a take from `g`: counted in flight and against the rates, and (kRoundRobin) the group's
// turn is over.
void GroupLine::Took(GroupId g, int64_t now, bool in_turn) {
  Group& group = groups_[g];
  ++group.inflight;
  ++inflight_;
  if (settings_.queue.rate) queue_rate_.Take(*settings_.queue.rate, now);
  if (Limited(g) && settings_.per_group.rate) group.rate.Take(*settings_.per_group.rate, now);
  if (in_turn && settings_.fairness == Fairness::kRoundRobin) {
    rotation_.pop_front();  // g: ChooseInTurn answered the front
    group.in_rotation = false;
  }
  Reassess(g, now);
  if (settings_.fairness == Fairness::kRoundRobin && group.active && !group.in_rotation) {
    group.in_rotation = true;
    rotation_.push_back(g);
  }
}

bool GroupLine::CanTake(int64_t now) const {
  if (!QueueAllows(now)) return false;
  return active_ > 0 || (!rate_parked_.empty() && rate_parked_.begin()->first <= now);
}

int64_t GroupLine::NextAllowedAt(int64_t now) const {
  int64_t at = active_ > 0            ? now
               : rate_parked_.empty() ? kNotParked
                                      : std::max(now, rate_parked_.begin()->first);
  if (at == kNotParked) return at;
  const JobLimits& q = settings_.queue;
  if (q.concurrency > 0 && inflight_ >= q.concurrency) return kNotParked;
  if (q.rate) at = std::max(at, queue_rate_.AllowedAtMs(*q.rate, now));
  return std::max(at, queue_held_until_);
}

void GroupLine::Configure(const QueueLimits& settings, int64_t now) {
  QueueLimits old = settings_;
  settings_ = settings;
  if (old.queue.rate && settings.queue.rate) {
    queue_rate_.Rescale(*old.queue.rate, *settings.queue.rate);
  } else if (!settings.queue.rate) {
    queue_rate_ = Gcra{};
  }
  fifo_.clear();
  rate_parked_.clear();
  active_ = 0;
  // Looked at in name order, so the groups that join the rotation now join it in an order that
  // does not depend on their ids.
  std::vector<GroupId> order;
  for (GroupId g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    if (old.per_group.rate && settings.per_group.rate) {
      group.rate.Rescale(*old.per_group.rate, *settings.per_group.rate);
    } else if (!settings.per_group.rate) {
      group.rate = Gcra{};
    }
    group.active = false;
    group.parked_conc = false;
    group.rate_parked_until = kNotParked;
    if (old.fairness != settings.fairness) group.in_rotation = false;
    if (group.refs > 0 || g == kUngrouped) order.push_back(g);
  }
  if (old.fairness != settings.fairness) rotation_.clear();
  std::sort(order.begin(), order.end(),
            [&](GroupId a, GroupId b) { return groups_[a].name < groups_[b].name; });
  for (GroupId g : order) Reassess(g, now);
}

bool GroupLine::CountJob(GroupId g, bool inflight) {
  if (g >= groups_.size() || (g != kUngrouped && groups_[g].name.empty())) return false;
  ++groups_[g].refs;
  if (inflight) {
    ++groups_[g].inflight;
    ++inflight_;
  }
  return true;
}

void GroupLine::Restored() {
  for (GroupId g = 1; g < groups_.size(); ++g) {
    if (groups_[g].refs == 0 && !groups_[g].name.empty()) unreferenced_.push_back(g);
  }
}

}  // namespace anteroom::core
