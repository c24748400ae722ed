#pragma once
// The one naming rule for rooms, sessions (and later queues, workers, dedupe keys):
// 1-128 bytes of [A-Za-z0-9._:-].

#include <cstddef>
#include <string_view>

namespace anteroom {

inline constexpr size_t kMaxNameBytes = 128;

bool IsValidName(std::string_view name);

}  // namespace anteroom
