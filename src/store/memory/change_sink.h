#pragma once
// What the in-memory state engine (MemoryBackend) needs from a write-ahead log to become durable
// (store/log/'s LogJournal implements it): append a change record, learn when it is as safe as
// the fsync policy promises, and know whether records can be written at all. Without a sink
// attached the engine is memory only.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace anteroom::store {

class ChangeSink {
 public:
  virtual ~ChangeSink() = default;
  // Appends one record; answers its log sequence number (the log's length in bytes after it,
  // counted over the whole life of the data directory). Called under the changed object's lock,
  // so the log holds each object's changes in the order they were made.
  virtual uint64_t Append(std::string_view record) = 0;
  // The highest sequence number already as safe as the policy promises.
  virtual uint64_t DurableLsn() const = 0;
  // Calls fn(true) once every record up to `lsn` is safe, or fn(false) when they could not be
  // written (disk full or failing). Calls fn inline when it already knows; otherwise later,
  // from the journal's thread.
  virtual void WhenDurable(uint64_t lsn, std::function<void(bool)> fn) = 0;
  // False while records cannot be written: changes are then refused before they are made.
  virtual bool Writable() const = 0;
  // Why records cannot be written (for the 503 answer), empty while they can.
  virtual std::string Problem() const = 0;
};

}  // namespace anteroom::store
