#include "store/lifecycle_event.h"

#include <fmt/format.h>

#include <charconv>

#include "core/room_notice.h"

namespace anteroom::store {

bool IsEventType(std::string_view type) {
  return core::ParseNoticeKind(type).has_value() || type == kQueuePaused ||
         type == kQueueResumed || type == kJobDead;
}

std::string EventId::ToString() const { return fmt::format("{}-{}", ms, n); }

std::optional<EventId> EventId::Parse(std::string_view text) {
  size_t dash = text.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == text.size()) return std::nullopt;
  EventId id;
  const char* begin = text.data();
  const char* mid = begin + dash;
  const char* end = begin + text.size();
  for (const char* p = begin; p < end; ++p) {
    if (p != mid && (*p < '0' || *p > '9')) return std::nullopt;  // no signs, no spaces
  }
  auto [p1, e1] = std::from_chars(begin, mid, id.ms);
  auto [p2, e2] = std::from_chars(mid + 1, end, id.n);
  if (e1 != std::errc() || p1 != mid || e2 != std::errc() || p2 != end) return std::nullopt;
  return id;
}

}  // namespace anteroom::store
