#pragma once
// The one rule of the embedded backend's answers: a change is answered only once its record is
// durable (as the journal's fsync policy defines it). Every room and queue operation answers
// through MemoryBackend::Answer with the log sequence number of the slot's latest record:
//  - no journal (memory-only), or everything up to `lsn` already durable, or a read while the
//    journal cannot write: answered at once;
//  - otherwise: answered when the journal says the record is safe, or with 503 (kUnavailable,
//    nothing promised) when it cannot be written; `after` learns which.
// A read answers after the records it saw, so nobody is told of a change that a crash would undo.
// Private to src/store/memory/.

#include "common/wire_errors.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store {

template <typename T>
void MemoryBackend::Answer(uint64_t lsn, Access access, Completion<T> done, OpResult<T> result,
                           Deferred after) {
  ChangeSink* journal = journal_.load(std::memory_order_acquire);
  if (journal == nullptr || lsn <= journal->DurableLsn() ||
      (access == Access::kRead && !journal->Writable())) {
    done(std::move(result));
    for (auto& fn : after) fn(true);
    return;
  }
  journal->WhenDurable(lsn, [journal, done = std::move(done), result = std::move(result),
                             after = std::move(after)](bool safe) mutable {
    if (safe) {
      done(std::move(result));
    } else {
      done(OpResult<T>(OpStatus::kUnavailable, wire::ChangeNotSaved(journal->Problem())));
    }
    for (auto& fn : after) fn(safe);
  });
}

}  // namespace anteroom::store
