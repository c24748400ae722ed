#include "store/redis/lua_rules.h"

#include <fmt/format.h>

#include <string_view>

#include "common/wire_errors.h"
#include "core/minute_window.h"
#include "core/queue_types.h"
#include "core/room.h"
#include "core/room_event.h"
#include "core/room_notice.h"
#include "core/room_pass.h"
#include "core/room_types.h"
#include "core/schedule.h"
#include "store/lifecycle_event.h"

namespace anteroom::store::redis {

namespace {
// A message with a figure in it, as a Lua function of the figure (a string): `words` is the
// message made with kFigure in the figure's place. Long brackets: the words are taken as they
// are, quotes and all.
constexpr std::string_view kFigure = "\x01";
std::string LuaMessage(const std::string& words) {
  size_t at = words.find(kFigure);
  return fmt::format("function(figure) return [==[{}]==] .. figure .. [==[{}]==] end",
                     words.substr(0, at), words.substr(at + kFigure.size()));
}
}  // namespace

std::string LuaRules() {
  using core::Room;
  const core::RoomConfig room;  // a new room's settings
  std::string rules = fmt::format(
      "local RULES = {{\n"
      // room.lua: a new room's settings, then the rules of core::Room
      "  capacity = {}, grace_ms = {}, checkin_timeout_ms = {}, idle_timeout_ms = {},\n"
      "  token_units = {}, table_full_retry_ms = {}, places_retry_min_ms = {},\n"
      "  kind_dropout = {}, kind_other = {}, window_seconds = {}, window_ms = {},\n"
      "  flow_bucket_ms = {}, flow_buckets = {},\n"
      // queue.lua: the rules of core::Queue
      "  backoff_base_ms = {}, backoff_cap_ms = {}, backoff_max_shift = {},\n"
      "  ack_memory_ms = {}, ack_memory_max = {}, kept_attempts = {},\n"
      "  keep_count = {}, keep_age_ms = {}, kept_log_lines = {}}}\n",
      room.capacity, room.grace_ms, room.checkin_timeout_ms, room.idle_timeout_ms.value_or(-1),
      Room::kTokenUnits, Room::kTableFullRetryMs, Room::kPlacesRetryMinMs, Room::kKindDropout,
      Room::kKindOther, core::MinuteWindow::kSeconds, core::MinuteWindow::kWindowMs,
      core::FlowHistory::kBucketMs, core::FlowHistory::kBuckets, core::kBackoffBaseMs,
      core::kBackoffCapMs, core::kBackoffMaxShift, core::kAckMemoryMs, core::kAckMemoryMax,
      core::kKeptAttempts, core::KeepFinished{}.count, core::KeepFinished{}.age_ms,
      core::kKeptLogLines);
  // Launch day: the queueing methods by their names (the scripts store and answer names, which
  // the backend reads with core::ParseQueueingMethod), the event stages by their codes, and the
  // schedule's bound.
  using core::EventStage;
  using core::QueueingMethod;
  rules += "RULES.method = {";
  for (auto m : {QueueingMethod::kFifo, QueueingMethod::kRandom, QueueingMethod::kPassthrough,
                 QueueingMethod::kReject, QueueingMethod::kQueueAll}) {
    rules += fmt::format("{0} = '{0}', ", core::ToString(m));
  }
  rules += "}\nRULES.stage = {";
  for (auto st :
       {EventStage::kScheduled, EventStage::kPrequeue, EventStage::kRunning, EventStage::kEnded}) {
    rules += fmt::format("{} = {}, ", core::ToString(st), static_cast<int>(st));
  }
  rules += fmt::format("}}\nRULES.max_events = {}\nRULES.min_event_cto = {}\n",
                       core::kMaxEventsPerRoom, core::kMinEventCheckinTimeoutMs);
  // A queue's batches (core::Queue::CreateBatch).
  rules += fmt::format("RULES.max_open_batches = {}\n", core::kMaxOpenBatches);
  rules += fmt::format(
      "local MSG = {{capacity_required = [==[{}]==],\n"
      "  join_needs_challenge = {},\n  client_table_full = {},\n"
      "  places_per_client_used = {},\n  joins_per_minute_used = {},\n",
      wire::kCapacityRequired, LuaMessage(wire::JoinNeedsChallenge(kFigure)),
      LuaMessage(wire::ClientTableFull(kFigure)), LuaMessage(wire::PlacesPerClientUsed(kFigure)),
      LuaMessage(wire::JoinsPerMinuteUsed(kFigure)));
  // The schedule's refusals (core::CheckEventChange, DeleteEvent).
  rules += fmt::format(
      "  prequeue_after_start = [==[{}]==],\n  ends_before_start = [==[{}]==],\n"
      "  event_checkin_timeout_zero = [==[{}]==],\n"
      "  event_over = [==[{}]==],\n  too_many_events = [==[{}]==],\n  event_ended = {},\n"
      "  prequeue_opened = {},\n  event_started = {},\n  events_overlap = {},\n"
      "  unknown_event = {}}}\n",
      wire::kPrequeueAfterStart, wire::kEndsBeforeStart, wire::kEventCheckinTimeoutZero,
      wire::kEventOver, wire::TooManyEvents(core::kMaxEventsPerRoom),
      LuaMessage(wire::EventEnded(kFigure)), LuaMessage(wire::PrequeueOpened(kFigure)),
      LuaMessage(wire::EventStarted(kFigure)), LuaMessage(wire::EventsOverlap(kFigure)),
      LuaMessage(wire::UnknownEvent(kFigure)));
  // Passes (core/room_pass.h, core Room::PassRefusal, AddPasses, RevokePasses).
  rules += fmt::format(
      "RULES.max_passes = {}\n"
      "MSG.pass_not_valid = [==[{}]==]\nMSG.pass_used_up = [==[{}]==]\n"
      "MSG.pass_expired = [==[{}]==]\nMSG.too_many_passes = [==[{}]==]\n"
      "MSG.pass_id_taken = {}\nMSG.unknown_pass = {}\n",
      core::kMaxPassesPerRoom, wire::kPassNotValid, wire::kPassUsedUp, wire::kPassExpired,
      wire::TooManyPasses(core::kMaxPassesPerRoom), LuaMessage(wire::PassIdTaken(kFigure)),
      LuaMessage(wire::UnknownPass(kFigure)));
  // Lifecycle events (core/room_notice.h, store/lifecycle_event.h): each room notice's wire type
  // by its name after the dot (RULES.notice.admitted = 'room.admitted'), a queue's, and what the
  // feed keeps.
  rules += "RULES.notice = {";
  for (int k = 0; k < core::kNoticeKinds; ++k) {
    std::string_view wire = core::ToWire(static_cast<core::NoticeKind>(k));
    rules += fmt::format("{} = '{}', ", wire.substr(wire.find('.') + 1), wire);
  }
  rules += fmt::format(
      "}}\nRULES.job_dead = '{}'\nRULES.queue_paused = '{}'\nRULES.queue_resumed = '{}'\n"
      "RULES.feed_keep_count = {}\nRULES.feed_keep_ms = {}\nRULES.feed_max_count = {}\n",
      kJobDead, kQueuePaused, kQueueResumed, kEventsKeepCount, kEventsKeepMs, kEventsMaxCount);
  return rules;
}

}  // namespace anteroom::store::redis
