#pragma once
// MemoryBackend::OnQueue, the one way a call reaches a queue (memory_queues.cc,
// memory_schedules.cc). Private to src/store/memory/.

#include "store/memory/durable_answer.h"
#include "store/memory/memory_slots.h"

namespace anteroom::store {

template <typename T, typename Fn>
void MemoryBackend::OnQueue(const std::string& name, Access access, bool create, Completion<T> done,
                            Fn&& fn) {
  if (auto refusal = Refusal(access)) {
    return done(OpResult<T>(OpStatus::kUnavailable, std::move(*refusal)));
  }
  std::optional<OpResult<T>> result;
  Deferred after;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::shared_ptr<QueueSlot> slot = FindQueue(name, create);
    if (slot) {
      {
        std::lock_guard lock(slot->mu);
        int64_t now = clock_.NowMs();
        result = fn(slot.get(), now, done);
        slot->Serve(now, after);
        TellQueue(*slot);
        Schedule(slot);
        lsn = slot->last_lsn;
      }
      DropIfEmpty(slot);
    } else {
      result = fn(nullptr, clock_.NowMs(), done);  // a queue nobody pushed to: the empty answer
    }
  }
  if (result) {
    Answer(lsn, access, std::move(done), std::move(*result), std::move(after));
  } else if (!after.empty()) {  // parked: answered later, but others may have been served
    Answer<Done>(
        lsn, access, [](OpResult<Done>) {}, Done{}, std::move(after));
  }
}

}  // namespace anteroom::store
