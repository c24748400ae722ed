#pragma once
// Test support: a ChangeSink that keeps every record in memory and calls everything durable at
// once (answers come inline), for tests that look at what the memory backend logs.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "store/memory/change_record.h"
#include "store/memory/change_sink.h"

namespace anteroom::store {

class KeepingJournal final : public ChangeSink {
 public:
  uint64_t Append(std::string_view record) override {
    records.emplace_back(record);
    return records.size();
  }
  uint64_t DurableLsn() const override { return records.size(); }
  void WhenDurable(uint64_t, std::function<void(bool)> fn) override { fn(true); }
  bool Writable() const override { return true; }
  std::string Problem() const override { return {}; }

  // The kind of each record, in order.
  std::vector<ChangeKind> Kinds() const {
    std::vector<ChangeKind> kinds;
    for (const auto& r : records) kinds.push_back(static_cast<ChangeKind>(r[0]));
    return kinds;
  }

  std::vector<std::string> records;
};

}  // namespace anteroom::store
