#include "server/event_json.h"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "common/wire_errors.h"
#include "common/wire_time.h"
#include "core/room_types.h"
#include "server/http_names.h"
#include "server/page_settings.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

static_assert(kLatestWireTimeMs == core::kLatestTimeMs,
              "common/wire_time.h bounds times as the engine does");

constexpr std::array<std::string_view, 8> kFields = {
    "name",           "prequeue_at", "starts_at", "ends_at", "shuffle_at_start",
    "prequeue_scope", "suspended",   "overrides"};
constexpr std::array<std::string_view, 6> kOverrideFields = {
    "capacity", "admit_per_minute", "grace_ms", "checkin_timeout_ms", "queueing_method", "page"};

template <size_t N>
bool IsOneOf(std::string_view key, const std::array<std::string_view, N>& names) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

// A time: RFC 3339 text or an integer of ms since the epoch, in [0, core::kLatestTimeMs].
OpResult<int64_t> TimeValue(const json::value& v, std::string_view key, bool nullable) {
  std::optional<int64_t> ms;
  if (v.is_int64()) {
    if (v.as_int64() >= 0 && v.as_int64() <= core::kLatestTimeMs) ms = v.as_int64();
  } else if (v.is_string()) {
    ms = ParseRfc3339Ms(std::string_view(v.as_string()));
  }
  if (!ms) return {OpStatus::kInvalidArgument, wire::BadTime(key, nullable)};
  return *ms;
}

// A required time field.
OpResult<int64_t> RequiredTime(const json::object& body, std::string_view key) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr) return {OpStatus::kInvalidArgument, wire::FieldRequired(key)};
  return TimeValue(*v, key, false);
}

// A field's error inside "overrides".
template <typename T>
OpResult<T> InOverrides(OpStatus status, const std::string& message) {
  return {status, wire::InField("overrides", message)};
}

OpResult<core::EventOverrides> ReadOverrides(const json::value& v) {
  if (!v.is_object()) return {OpStatus::kInvalidArgument, wire::NotAnObject("overrides")};
  const json::object& o = v.as_object();
  for (const auto& field : o) {
    if (!IsOneOf(field.key(), kOverrideFields)) {
      return InOverrides<core::EventOverrides>(OpStatus::kInvalidArgument,
                                               wire::UnknownEventOverride(field.key()));
    }
  }
  core::EventOverrides out;
  // The ranges of the room's own settings (rooms_family.cc, ReadPatch).
  struct IntField {
    std::string_view key;
    int64_t min;
    int64_t max;
    std::optional<int64_t>* into;
  };
  for (const IntField& f : {
           IntField{"capacity", 1, core::kMaxCapacity, &out.capacity},
           IntField{"admit_per_minute", 1, core::kMaxAdmitPerMinute, &out.admit_per_minute},
           IntField{"grace_ms", 0, core::kMaxDurationMs, &out.grace_ms},
           IntField{"checkin_timeout_ms", 0, core::kMaxDurationMs, &out.checkin_timeout_ms},
       }) {
    auto n = ReadInt(o, f.key, f.min, f.max);
    if (!n.ok()) return InOverrides<core::EventOverrides>(n.status(), n.message());
    *f.into = *n;
  }
  auto method = ReadString(o, "queueing_method");
  if (!method.ok()) return InOverrides<core::EventOverrides>(method.status(), method.message());
  if (*method) {
    out.queueing_method = core::ParseQueueingMethod(**method);
    if (!out.queueing_method) {
      return InOverrides<core::EventOverrides>(
          OpStatus::kInvalidArgument, wire::NotOneOf("queueing_method", core::kQueueingMethods));
    }
  }
  if (const json::value* page = o.if_contains("page")) {
    // The same object as the room's page setting (server/page_settings.h), kept canonical.
    auto text = CanonicalPageText(*page, "overrides.page");
    if (!text.ok()) return {text.status(), text.message()};
    out.page = std::move(*text);
  }
  return out;
}

json::value OverridesJson(const core::EventOverrides& o) {
  json::object out;
  if (o.capacity) out["capacity"] = *o.capacity;
  if (o.admit_per_minute) out["admit_per_minute"] = *o.admit_per_minute;
  if (o.grace_ms) out["grace_ms"] = *o.grace_ms;
  if (o.checkin_timeout_ms) out["checkin_timeout_ms"] = *o.checkin_timeout_ms;
  if (o.queueing_method) out["queueing_method"] = core::ToString(*o.queueing_method);
  if (o.page) {
    // The text ReadOverrides kept: an object. Anything else was never stored by this code.
    boost::system::error_code ec;
    json::value page = json::parse(*o.page, ec);
    out["page"] = !ec && page.is_object() ? std::move(page) : json::value(nullptr);
  }
  return out;
}

json::value TimeText(const std::optional<int64_t>& ms) {
  return ms ? json::value(FormatRfc3339Ms(*ms)) : json::value(nullptr);
}

// "key": RFC 3339 and "key_ms": the integer, both null for no time.
void PutTime(json::object& o, std::string_view key, const std::optional<int64_t>& ms) {
  o[key] = TimeText(ms);
  o[std::string(key) + "_ms"] = ms ? json::value(*ms) : json::value(nullptr);
}

// "key_in_ms" while `ms` is in the future.
void PutCountdown(json::object& o, std::string_view key, const std::optional<int64_t>& ms,
                  int64_t now_ms) {
  if (ms && *ms > now_ms) o[std::string(key) + "_in_ms"] = *ms - now_ms;
}

std::string Hex(const core::DrawSeed& seed) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(seed.size() * 2);
  for (uint8_t byte : seed) {
    out += kDigits[byte >> 4];
    out += kDigits[byte & 0x0f];
  }
  return out;
}

const char* Phase(const core::RoomEvent& e) {
  if (e.spec.suspended && e.stage != core::EventStage::kEnded) return "suspended";
  return core::ToString(e.stage);
}

}  // namespace

OpResult<int64_t> ReadWireTime(const json::value& v, std::string_view key, bool nullable) {
  return TimeValue(v, key, nullable);
}

void PutWireTime(json::object& o, std::string_view key, const std::optional<int64_t>& ms) {
  PutTime(o, key, ms);
}

OpResult<core::EventSpec> ReadEventSpec(const json::object& body) {
  // Unknown fields first: a misspelt "start_at" is named as such, not as a missing "starts_at".
  for (const auto& field : body) {
    if (!IsOneOf(field.key(), kFields)) {
      return {OpStatus::kInvalidArgument, wire::UnknownField(field.key(), wire::kEventFields)};
    }
  }
  core::EventSpec spec;
  auto name = ReadString(body, "name");
  if (!name.ok()) return {name.status(), name.message()};
  if (*name) {
    if ((*name)->size() > core::kMaxEventNameBytes) {
      return {OpStatus::kInvalidArgument, wire::LongerThan("name", core::kMaxEventNameBytes)};
    }
    spec.name = std::move(**name);
  }
  if (const json::value* v = body.if_contains("prequeue_at"); v != nullptr && !v->is_null()) {
    auto at = TimeValue(*v, "prequeue_at", true);
    if (!at.ok()) return {at.status(), at.message()};
    spec.prequeue_at = *at;
  }
  auto starts = RequiredTime(body, "starts_at");
  if (!starts.ok()) return {starts.status(), starts.message()};
  spec.starts_at = *starts;
  auto ends = RequiredTime(body, "ends_at");
  if (!ends.ok()) return {ends.status(), ends.message()};
  spec.ends_at = *ends;
  auto shuffle = ReadBool(body, "shuffle_at_start");
  if (!shuffle.ok()) return {shuffle.status(), shuffle.message()};
  spec.shuffle_at_start = shuffle->value_or(false);
  auto scope = ReadString(body, "prequeue_scope");
  if (!scope.ok()) return {scope.status(), scope.message()};
  if (*scope) {
    auto parsed = core::ParsePrequeueScope(**scope);
    if (!parsed) {
      return {OpStatus::kInvalidArgument, wire::NotOneOf("prequeue_scope", wire::kPrequeueScopes)};
    }
    spec.prequeue_scope = *parsed;
  }
  auto suspended = ReadBool(body, "suspended");
  if (!suspended.ok()) return {suspended.status(), suspended.message()};
  spec.suspended = suspended->value_or(false);
  if (const json::value* v = body.if_contains("overrides")) {
    auto overrides = ReadOverrides(*v);
    if (!overrides.ok()) return {overrides.status(), overrides.message()};
    spec.overrides = std::move(*overrides);
  }
  return spec;
}

json::object EventSpecJson(const core::EventSpec& spec) {
  return json::object{
      {"name", spec.name},
      {"prequeue_at", TimeText(spec.prequeue_at)},
      {"starts_at", FormatRfc3339Ms(spec.starts_at)},
      {"ends_at", FormatRfc3339Ms(spec.ends_at)},
      {"shuffle_at_start", spec.shuffle_at_start},
      {"prequeue_scope", core::ToString(spec.prequeue_scope)},
      {"suspended", spec.suspended},
      {"overrides", OverridesJson(spec.overrides)},
  };
}

json::object EventJson(const core::RoomEvent& e, int64_t now_ms) {
  const core::EventSpec& spec = e.spec;
  json::object o;
  o["id"] = e.id;
  o["name"] = spec.name;
  o["phase"] = Phase(e);
  PutTime(o, "prequeue_at", spec.prequeue_at);
  PutTime(o, "starts_at", spec.starts_at);
  PutTime(o, "ends_at", spec.ends_at);
  o["shuffle_at_start"] = spec.shuffle_at_start;
  o["prequeue_scope"] = core::ToString(spec.prequeue_scope);
  o["suspended"] = spec.suspended;
  o["overrides"] = OverridesJson(spec.overrides);
  PutCountdown(o, "prequeue", spec.prequeue_at, now_ms);
  PutCountdown(o, "starts", spec.starts_at, now_ms);
  PutCountdown(o, "ends", spec.ends_at, now_ms);
  if (e.shuffle) {
    json::object shuffle{{"seed", Hex(e.shuffle->seed)}, {"count", e.shuffle->count}};
    PutTime(shuffle, "at", e.shuffle->at);
    o["shuffle"] = std::move(shuffle);
  } else {
    o["shuffle"] = nullptr;
  }
  return o;
}

}  // namespace anteroom::server
