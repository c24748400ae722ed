#include "http/body_budget.h"

#include <malloc.h>

#include <algorithm>
#include <vector>

namespace anteroom::http {

BodyBudget::Ticket::Ticket(std::shared_ptr<BodyBudget> budget, size_t bytes, int64_t now_ms,
                           std::function<void()> cut)
    : budget_(std::move(budget)), bytes_(bytes), last_progress_ms_(now_ms), cut_(std::move(cut)) {}

BodyBudget::Ticket::~Ticket() { budget_->Release(*this); }

void BodyBudget::Ticket::Progress(uint64_t received, int64_t now_ms) {
  std::lock_guard lock(budget_->mu_);
  if (received > received_) {
    received_ = received;
    last_progress_ms_ = now_ms;
  }
}

void BodyBudget::Release(Ticket& ticket) {
  std::lock_guard lock(mu_);
  held_ -= ticket.bytes_;
  tickets_.erase(ticket.place_);
}

std::shared_ptr<BodyBudget::Ticket> BodyBudget::Reserve(size_t bytes, int64_t now_ms,
                                                        std::function<void()> cut,
                                                        int64_t min_stall_ms) {
  std::vector<std::function<void()>> to_cut;
  std::shared_ptr<Ticket> ticket;
  {
    std::lock_guard lock(mu_);
    if (held_ + bytes <= limit_) {
      ticket.reset(new Ticket(shared_from_this(), bytes, now_ms, std::move(cut)));
      held_ += bytes;
      ticket->place_ = tickets_.insert(tickets_.end(), ticket.get());
      return ticket;
    }
    ++refused_;
    if (bytes > limit_) return nullptr;  // would not fit with everyone cut: cut nobody
    // The stalest first: a sender that stopped sending is the likeliest to be holding memory
    // on purpose (all but the last byte, then silence).
    std::vector<Ticket*> stalled;
    size_t freeing = 0;
    for (Ticket* t : tickets_) {
      if (t->cutting_) {
        freeing += t->bytes_;
      } else if (now_ms - t->last_progress_ms_ >= min_stall_ms) {
        stalled.push_back(t);
      }
    }
    std::sort(stalled.begin(), stalled.end(), [](const Ticket* a, const Ticket* b) {
      return a->last_progress_ms_ < b->last_progress_ms_;
    });
    for (Ticket* t : stalled) {
      if (held_ - freeing + bytes <= limit_) break;
      t->cutting_ = true;
      freeing += t->bytes_;
      ++cut_;
      to_cut.push_back(t->cut_);
    }
  }
  for (auto& c : to_cut) c();  // outside the lock: each only posts to its connection's thread
  return nullptr;
}

size_t BodyBudget::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

uint64_t BodyBudget::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

uint64_t BodyBudget::cut() const {
  std::lock_guard lock(mu_);
  return cut_;
}

void ReturnBigBlocksToTheSystem() {
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
}

}  // namespace anteroom::http
