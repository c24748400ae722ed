#pragma once
// The ready jobs of a queue whose jobs carry a group (a tenant, a customer, an API key), in the
// order a fetch takes them, and the limits that hold groups back:
//
//  - Fairness kFifo: the next job is the first of every group's ready jobs in the queue's
//    delivery order (higher priority, then `order`), among the groups not held back.
//    kRoundRobin: groups take turns, one job a turn, so a group with a million ready jobs and one
//    with ten both move; within a group, priority then order.
//  - Limits, per group (each group its own; the ungrouped jobs are exempt) and for the whole
//    queue: a rate (core::RateLimit, GCRA) and a concurrency (jobs of the group in flight at
//    once). A group over either is *parked*: out of the choice until its rate allows (a time,
//    NextAllowedAt) or one of its jobs in flight ends (Finished). A held-back job is not taken,
//    so it uses up no attempt.
//
// Cost: a take is O(log g) for g groups with ready jobs (a parked group is looked at once when
// it parks and once when it comes back), whatever the number of groups or jobs.
//
// Invariants (tests/unit/group_line_test.cc, against a reference that scans every job):
//  - A group is in exactly one of: active (fifo_ or rotation_, when it has live ready jobs and
//    is not held back), rate_parked_, concurrency-parked (`parked_conc`), or none (no live
//    ready job).
//  - fifo_'s key of a group is at most its live head's (dead entries at the head only make the
//    key too early; Take corrects it before using it).
//  - inflight of a group = its jobs taken and not yet Finished; the queue's is their sum.
//
// Groups are interned: a job holds a GroupId, counted in the group's `refs` until the job is gone
// (ready, delayed, in flight or dead alike), so a group's id stays its own while any job names it.
// A group with no job and nothing owed to its rate is forgotten (Sweep).

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "core/queue_limits.h"
#include "core/rate_limit.h"
#include "core/ready_line.h"

namespace anteroom::core {

class GroupLine {
 public:
  using Index = ReadyLine::Index;
  using GroupId = uint32_t;
  static constexpr GroupId kUngrouped = 0;  // the jobs pushed without a group

  GroupLine();

  // Settings apply from now on; every group is looked at again, in name order. The rotation's
  // turns are kept.
  void Configure(const QueueLimits& settings, int64_t now);
  const QueueLimits& settings() const { return settings_; }

  // A job names `group` ("" is kUngrouped): counted until Unref.
  GroupId Ref(std::string_view group);
  void Unref(GroupId g);
  const std::string& Name(GroupId g) const { return groups_[g].name; }

  // A job became ready: at the back of its priority, or (returned after a failed delivery) at
  // its front. `order` is the queue's delivery order within a priority, lower first (a front
  // push has the lowest yet).
  void PushBack(GroupId g, Index i, int32_t priority, int64_t order, uint64_t ticket, int64_t now);
  void PushFront(GroupId g, Index i, int32_t priority, int64_t order, uint64_t ticket, int64_t now);
  // A ready job of `g` left the line by other means (cancelled): its entry is now stale.
  void Forget(GroupId g, int64_t now);

  // Takes the next job a fetch may have at `now`, counting it in flight; nullopt when none may
  // (none ready, or all held back). `live(i, ticket)`: whether an entry is current;
  // `order_of(i)`: the queue's order of a live job.
  template <typename Live, typename OrderOf>
  std::optional<Index> Take(int64_t now, const Live& live, const OrderOf& order_of);
  // Takes a given ready job of `g` (its entry made stale by the caller) if its group and the
  // queue allow a take at `now`, counting it as Take does but out of turn (the rotation stays).
  bool TakeThis(GroupId g, int64_t now);
  // A job taken from `g` is no longer in flight (acked, failed, expired, released).
  void Finished(GroupId g, int64_t now);
  // Nothing of `g` is taken before `until` (a worker was told to slow down); kUngrouped holds
  // every group, the whole queue.
  void Hold(GroupId g, int64_t until, int64_t now);

  size_t size() const { return size_; }  // live ready jobs
  bool empty() const { return size_ == 0; }
  // Whether Take at `now` would find a job (long polls are woken by it).
  bool CanTake(int64_t now) const;
  // When a job held back by a rate may be taken: the earliest, INT64_MAX when none waits on a
  // rate (nothing ready, or only concurrency holds them back: a Finished frees them).
  int64_t NextAllowedAt(int64_t now) const;
  // Forgets groups with no job whose rates owe nothing at `now` (a few a call: each comes round).
  void Sweep(int64_t now);

  size_t groups() const { return by_name_.size(); }
  GroupId IdOf(std::string_view group) const {
    auto it = by_name_.find(std::string(group));
    return it == by_name_.end() ? kUngrouped : it->second;
  }

  // Snapshots: the whole state, so that a restored line takes, parks and rotates exactly as this
  // one would have. The ready entries are written as live(i, ticket) says, each group's in its
  // order; Restore puts them back with `place(i)` -> (priority, ticket), and needs the groups'
  // refs and in-flight counts, which follow from the jobs, set by Ref and CountInflight.
  template <typename Live>
  void Save(ByteWriter& out, const Live& live) const;
  template <typename Place>
  bool Restore(ByteReader& in, const Place& place);
  // Restore's companions: each job read back names group id `g` (false: no such group), then
  // Restored once all are counted.
  bool CountJob(GroupId g, bool inflight);
  void Restored();
  int64_t inflight(GroupId g) const { return groups_[g].inflight; }
  int64_t inflight() const { return inflight_; }

 private:
  using Key = std::tuple<int64_t, int64_t, GroupId>;  // (-priority, order, group)
  static Key KeyOf(int32_t priority, int64_t order, GroupId g) {
    return {-static_cast<int64_t>(priority), order, g};
  }
  static constexpr int64_t kNotParked = std::numeric_limits<int64_t>::max();
  struct Group {
    std::string name;
    ReadyLine line;
    int64_t refs = 0;
    int64_t inflight = 0;
    Gcra rate;
    bool active = false;       // in the choice: in fifo_ (under `key`), or listed in rotation_
    Key key{};                 // its entry in fifo_ while active (kFifo)
    bool in_rotation = false;  // listed in rotation_ (an entry may outlive `active`: see Take)
    bool parked_conc = false;  // at its concurrency: back when a job of it is Finished
    int64_t rate_parked_until = kNotParked;  // in rate_parked_ under this time
    int64_t held_until = 0;                  // Hold: nothing taken before
  };
  // rate_parked_'s order: allowed-at, then the group's name, so ties are broken the same way
  // whatever ids the groups were given (Redis orders its set of parked groups likewise).
  struct ParkedOrder {
    const std::vector<Group>* groups;
    bool operator()(const std::pair<int64_t, GroupId>& a,
                    const std::pair<int64_t, GroupId>& b) const {
      if (a.first != b.first) return a.first < b.first;
      return (*groups)[a.second].name < (*groups)[b.second].name;
    }
  };

  bool Limited(GroupId g) const { return g != kUngrouped; }
  bool QueueAllows(int64_t now) const;
  // When a take from `g` is allowed by its own limits and hold (now, or later).
  int64_t GroupAllowedAt(GroupId g, int64_t now) const;
  // Puts the group where its state says: active, parked, or out (no live job). `head`: the key
  // of a job just placed, which may now lead an active group.
  void Reassess(GroupId g, int64_t now, std::optional<Key> head = std::nullopt);
  void Activate(GroupId g, Key key);
  void Deactivate(GroupId g);
  void RateUnpark(GroupId g);
  void Push(GroupId g, int32_t priority, int64_t order, int64_t now);
  void Unpark(int64_t now);
  std::optional<GroupId> ChooseInTurn();  // the group a take comes from (kRoundRobin)
  template <typename Live, typename OrderOf>
  std::optional<GroupId> ChooseFifo(const Live& live, const OrderOf& order_of);
  void Took(GroupId g, int64_t now, bool in_turn);

  QueueLimits settings_;
  std::vector<Group> groups_;
  std::vector<GroupId> free_groups_;
  std::unordered_map<std::string, GroupId> by_name_;
  std::set<Key> fifo_;
  std::deque<GroupId> rotation_;
  std::deque<GroupId> unreferenced_;  // groups whose refs fell to 0: Sweep's to look at
  std::set<std::pair<int64_t, GroupId>, ParkedOrder> rate_parked_{ParkedOrder{&groups_}};
  Gcra queue_rate_;
  int64_t queue_held_until_ = 0;
  int64_t inflight_ = 0;
  size_t size_ = 0;
  size_t active_ = 0;  // groups in the choice
};

// Corrects fifo_'s key of the first group until it is its live head's: a key is never later
// than the head, so the first group with a correct key leads.
template <typename Live, typename OrderOf>
std::optional<GroupLine::GroupId> GroupLine::ChooseFifo(const Live& live, const OrderOf& order_of) {
  while (!fifo_.empty()) {
    GroupId g = std::get<2>(*fifo_.begin());
    Group& group = groups_[g];
    auto [i, priority] = group.line.Front(live);
    Key head = KeyOf(priority, order_of(i), g);
    if (head == group.key) return g;
    auto node = fifo_.extract(fifo_.begin());  // reused: no allocation per take
    node.value() = group.key = head;
    fifo_.insert(std::move(node));
  }
  return std::nullopt;
}

template <typename Live, typename OrderOf>
std::optional<GroupLine::Index> GroupLine::Take(int64_t now, const Live& live,
                                                const OrderOf& order_of) {
  Unpark(now);
  if (!QueueAllows(now)) return std::nullopt;
  std::optional<GroupId> g =
      settings_.fairness == Fairness::kFifo ? ChooseFifo(live, order_of) : ChooseInTurn();
  if (!g) return std::nullopt;
  Index i = groups_[*g].line.TakeFirst(live);
  --size_;
  Took(*g, now, /*in_turn=*/true);
  return i;
}

template <typename Live>
void GroupLine::Save(ByteWriter& out, const Live& live) const {
  SaveLimits(out, settings_);
  queue_rate_.Save(out);
  out.Put(queue_held_until_);
  out.Put<uint64_t>(groups_.size());
  for (const Group& group : groups_) {
    out.PutString(group.name);
    group.rate.Save(out);
    out.Put(group.held_until);
    out.PutBool(group.active);
    out.Put(std::get<0>(group.key));
    out.Put(std::get<1>(group.key));
    out.PutBool(group.in_rotation);
    out.PutBool(group.parked_conc);
    out.Put(group.rate_parked_until);
    std::vector<Index> ready;
    group.line.ForEach([&](Index i, int32_t, uint64_t ticket) {
      if (live(i, ticket)) ready.push_back(i);
    });
    out.Put<uint64_t>(ready.size());
    for (Index i : ready) out.Put(i);
  }
  out.Put<uint64_t>(free_groups_.size());
  for (GroupId g : free_groups_) out.Put(g);
  out.Put<uint64_t>(rotation_.size());
  for (GroupId g : rotation_) out.Put(g);
}

template <typename Place>
bool GroupLine::Restore(ByteReader& in, const Place& place) {
  if (!LoadLimits(in, settings_)) return false;
  if (!queue_rate_.Load(in)) return false;
  queue_held_until_ = in.Get<int64_t>();
  uint64_t n = in.GetCount(4);
  if (n == 0 || n > UINT32_MAX || in.failed()) return false;
  groups_.clear();
  by_name_.clear();
  groups_.resize(n);
  for (GroupId g = 0; g < n && !in.failed(); ++g) {
    Group& group = groups_[g];
    group.name = in.GetString();
    if (!group.rate.Load(in)) return false;
    group.held_until = in.Get<int64_t>();
    group.active = in.GetBool();
    int64_t p = in.Get<int64_t>();
    int64_t o = in.Get<int64_t>();
    group.key = Key{p, o, g};
    group.in_rotation = in.GetBool();
    group.parked_conc = in.GetBool();
    group.rate_parked_until = in.Get<int64_t>();
    uint64_t ready = in.GetCount(4);
    for (uint64_t k = 0; k < ready && !in.failed(); ++k) {
      Index i = in.Get<Index>();
      std::optional<std::pair<int32_t, uint64_t>> at = place(i);
      if (!at) return false;
      group.line.PushBack(i, at->first, at->second);
      ++size_;
    }
    if (g == kUngrouped ? !group.name.empty()
                        : !group.name.empty() && !by_name_.emplace(group.name, g).second) {
      return false;
    }
    if (group.active) {
      ++active_;
      if (settings_.fairness == Fairness::kFifo) fifo_.insert(group.key);
    }
  }
  by_name_.emplace("", kUngrouped);
  uint64_t free_count = in.GetCount(4);
  for (uint64_t k = 0; k < free_count && !in.failed(); ++k) {
    GroupId g = in.Get<GroupId>();
    if (g == kUngrouped || g >= n || !groups_[g].name.empty()) return false;
    free_groups_.push_back(g);
  }
  uint64_t rotation = in.GetCount(4);
  for (uint64_t k = 0; k < rotation && !in.failed(); ++k) {
    GroupId g = in.Get<GroupId>();
    if (g >= n) return false;
    rotation_.push_back(g);
  }
  // rate_parked_ orders by name: inserted once every name is read.
  for (GroupId g = 0; g < n && !in.failed(); ++g) {
    if (groups_[g].rate_parked_until != kNotParked) {
      rate_parked_.insert({groups_[g].rate_parked_until, g});
    }
  }
  return !in.failed();
}

}  // namespace anteroom::core
