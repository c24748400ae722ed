#include "http/drain_list.h"

#include <algorithm>

namespace anteroom::http {

void DrainList::Add(const std::shared_ptr<Drainable>& member) {
  {
    std::lock_guard lock(mu_);
    if (!draining_) {
      // Ended members are swept out when the list has doubled since the last sweep: each
      // sweep's cost is paid for by the additions that preceded it.
      if (members_.size() >= prune_at_) {
        std::erase_if(members_, [](const std::weak_ptr<Drainable>& m) { return m.expired(); });
        prune_at_ = std::max(kMinPrune, 2 * members_.size());
      }
      members_.push_back(member);
      return;
    }
  }
  member->BeginDrain();
}

void DrainList::Drain() {
  std::vector<std::weak_ptr<Drainable>> members;
  {
    std::lock_guard lock(mu_);
    if (draining_) return;
    draining_ = true;
    members.swap(members_);
  }
  for (const auto& weak : members) {
    if (auto member = weak.lock()) member->BeginDrain();
  }
}

bool DrainList::draining() const {
  std::lock_guard lock(mu_);
  return draining_;
}

}  // namespace anteroom::http
