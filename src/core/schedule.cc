#include "core/schedule.h"

#include <algorithm>

#include "common/wire_errors.h"
#include "core/room_types.h"

namespace anteroom::core {

namespace {
bool Within(int64_t v, int64_t min, int64_t max) { return v >= min && v <= max; }
bool OptWithin(const std::optional<int64_t>& v, int64_t min, int64_t max) {
  return !v || Within(*v, min, max);
}
}  // namespace

bool InRange(const EventSpec& s) {
  const EventOverrides& o = s.overrides;
  return s.name.size() <= kMaxEventNameBytes && OptWithin(s.prequeue_at, 0, kLatestTimeMs) &&
         Within(s.starts_at, 0, kLatestTimeMs) && Within(s.ends_at, 0, kLatestTimeMs) &&
         s.OpensAt() <= s.starts_at && s.starts_at < s.ends_at &&
         OptWithin(o.capacity, 1, kMaxCapacity) &&
         OptWithin(o.admit_per_minute, 1, kMaxAdmitPerMinute) &&
         OptWithin(o.grace_ms, 0, kMaxDurationMs) &&
         OptWithin(o.checkin_timeout_ms, kMinEventCheckinTimeoutMs, kMaxDurationMs) &&
         (!o.page || o.page->size() <= kMaxEventPageBytes);
}

OpResult<Done> CheckEventChange(const std::vector<RoomEvent>& events, std::string_view id,
                                const EventSpec& spec, int64_t now_ms) {
  if (spec.prequeue_at && *spec.prequeue_at > spec.starts_at) {
    return {OpStatus::kInvalidArgument, std::string(wire::kPrequeueAfterStart)};
  }
  if (spec.starts_at >= spec.ends_at) {
    return {OpStatus::kInvalidArgument, std::string(wire::kEndsBeforeStart)};
  }
  if (spec.overrides.checkin_timeout_ms &&
      *spec.overrides.checkin_timeout_ms < kMinEventCheckinTimeoutMs) {
    return {OpStatus::kInvalidArgument, std::string(wire::kEventCheckinTimeoutZero)};
  }
  auto it = std::find_if(events.begin(), events.end(), [&](const auto& e) { return e.id == id; });
  if (it == events.end()) {
    if (spec.ends_at <= now_ms) return {OpStatus::kInvalidArgument, std::string(wire::kEventOver)};
    if (events.size() >= kMaxEventsPerRoom) {
      return {OpStatus::kConflict, wire::TooManyEvents(kMaxEventsPerRoom)};
    }
  } else {
    const EventSpec& was = it->spec;
    if (it->stage == EventStage::kEnded) return {OpStatus::kConflict, wire::EventEnded(id)};
    if (it->stage != EventStage::kScheduled && spec.prequeue_at != was.prequeue_at) {
      return {OpStatus::kConflict, wire::PrequeueOpened(id)};
    }
    if (it->stage == EventStage::kRunning &&
        (spec.starts_at != was.starts_at || spec.ends_at > was.ends_at)) {
      return {OpStatus::kConflict, wire::EventStarted(id)};
    }
  }
  for (const RoomEvent& other : events) {
    if (other.id == id) continue;
    if (std::max(spec.OpensAt(), other.spec.OpensAt()) <
        std::min(spec.ends_at, other.spec.ends_at)) {
      return {OpStatus::kConflict, wire::EventsOverlap(other.id)};
    }
  }
  return Done{};
}

}  // namespace anteroom::core
