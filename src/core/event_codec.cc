#include "core/event_codec.h"

#include <algorithm>

#include "core/room_types.h"
#include "core/schedule.h"

namespace anteroom::core {

namespace {
void SaveOpt(ByteWriter& out, const std::optional<int64_t>& v) {
  out.PutBool(v.has_value());
  out.Put<int64_t>(v.value_or(0));
}
std::optional<int64_t> LoadOpt(ByteReader& in) {
  bool has = in.GetBool();
  int64_t v = in.Get<int64_t>();
  return has ? std::optional<int64_t>(v) : std::nullopt;
}
template <typename Enum>
Enum LoadEnum(ByteReader& in, Enum last) {
  auto v = in.Get<uint8_t>();
  if (v > static_cast<uint8_t>(last)) in.Fail();
  return in.failed() ? Enum{} : static_cast<Enum>(v);
}
}  // namespace

void SaveSeed(ByteWriter& out, const DrawSeed& seed) {
  out.PutString(std::string_view(reinterpret_cast<const char*>(seed.data()), seed.size()));
}

DrawSeed LoadSeed(ByteReader& in) {
  DrawSeed seed{};
  std::string_view bytes = in.GetView();
  if (bytes.size() == seed.size()) {
    std::copy(bytes.begin(), bytes.end(), seed.begin());
  } else {
    in.Fail();
  }
  return seed;
}

void SaveEventSpec(ByteWriter& out, const EventSpec& s) {
  out.PutString(s.name);
  SaveOpt(out, s.prequeue_at);
  out.Put(s.starts_at);
  out.Put(s.ends_at);
  out.PutBool(s.shuffle_at_start);
  out.Put(static_cast<uint8_t>(s.prequeue_scope));
  out.PutBool(s.suspended);
  const EventOverrides& o = s.overrides;
  SaveOpt(out, o.capacity);
  SaveOpt(out, o.admit_per_minute);
  SaveOpt(out, o.grace_ms);
  SaveOpt(out, o.checkin_timeout_ms);
  out.PutBool(o.queueing_method.has_value());
  out.Put(static_cast<uint8_t>(o.queueing_method.value_or(QueueingMethod::kFifo)));
  out.PutBool(o.page.has_value());
  if (o.page) out.PutString(*o.page);
}

EventSpec LoadEventSpec(ByteReader& in) {
  EventSpec s;
  s.name = in.GetString();
  s.prequeue_at = LoadOpt(in);
  s.starts_at = in.Get<int64_t>();
  s.ends_at = in.Get<int64_t>();
  s.shuffle_at_start = in.GetBool();
  s.prequeue_scope = LoadEnum(in, PrequeueScope::kAll);
  s.suspended = in.GetBool();
  EventOverrides& o = s.overrides;
  o.capacity = LoadOpt(in);
  o.admit_per_minute = LoadOpt(in);
  o.grace_ms = LoadOpt(in);
  o.checkin_timeout_ms = LoadOpt(in);
  bool has_method = in.GetBool();
  QueueingMethod method = LoadEnum(in, QueueingMethod::kQueueAll);
  if (has_method) o.queueing_method = method;
  if (in.GetBool()) o.page = in.GetString();
  if (!in.failed() && !InRange(s)) in.Fail();
  return s;
}

void SaveRoomEvent(ByteWriter& out, const RoomEvent& e) {
  out.PutString(e.id);
  SaveEventSpec(out, e.spec);
  out.Put(static_cast<uint8_t>(e.stage));
  out.PutBool(e.shuffle.has_value());
  if (e.shuffle) {
    SaveSeed(out, e.shuffle->seed);
    out.Put(e.shuffle->count);
    out.Put(e.shuffle->at);
  }
}

RoomEvent LoadRoomEvent(ByteReader& in) {
  RoomEvent e;
  e.id = in.GetString();
  e.spec = LoadEventSpec(in);
  e.stage = LoadEnum(in, EventStage::kEnded);
  if (in.GetBool()) {
    ShuffleOutcome shuffle;
    shuffle.seed = LoadSeed(in);
    shuffle.count = in.Get<int64_t>();
    shuffle.at = in.Get<int64_t>();
    if (shuffle.count < 0 || shuffle.at < 0 || shuffle.at > kLatestTimeMs) in.Fail();
    e.shuffle = shuffle;
  }
  return e;
}

}  // namespace anteroom::core
