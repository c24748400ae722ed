#include "core/room_notice.h"

#include <array>

namespace anteroom::core {

namespace {
constexpr std::array<std::string_view, kNoticeKinds> kWire = {
    "room.joined",         "room.admitted",  "room.left",      "room.dropped",
    "room.expired",        "room.revoked",   "room.pass_used", "room.position_near",
    "room.method_changed", "event.prequeue", "event.started",  "event.ended",
    "room.changed",        "room.created",   "room.deleted",
};
}  // namespace

std::string_view ToWire(NoticeKind kind) { return kWire[static_cast<size_t>(kind)]; }

std::optional<NoticeKind> ParseNoticeKind(std::string_view wire) {
  for (size_t i = 0; i < kWire.size(); ++i) {
    if (kWire[i] == wire) return static_cast<NoticeKind>(i);
  }
  return std::nullopt;
}

}  // namespace anteroom::core
