#include "server/schedule_json.h"

#include <array>
#include <cmath>

#include "common/names.h"
#include "common/time_zones.h"
#include "common/wire_errors.h"
#include "common/wire_time.h"
#include "core/room_types.h"
#include "http/json_body.h"
#include "server/event_json.h"
#include "server/payload_text.h"

namespace anteroom::server {

namespace json = boost::json;
using http::ReadInt;
using http::ReadName;
using http::ReadString;

namespace {

constexpr std::array<std::string_view, 13> kFields = {
    "queue",       "cron",      "tz",      "every_ms", "start_at",
    "end_at",      "max_runs",  "overlap", "misfire",  "misfire_grace_ms",
    "max_catchup", "jitter_ms", "job"};
constexpr std::array<std::string_view, 4> kJobFields = {"payload", "priority", "group",
                                                        "max_attempts"};

template <size_t N>
bool IsOneOf(std::string_view key, const std::array<std::string_view, N>& keys) {
  for (std::string_view k : keys) {
    if (k == key) return true;
  }
  return false;
}

OpResult<core::ScheduleSpec> Invalid(std::string message) {
  return {OpStatus::kInvalidArgument, std::move(message)};
}

}  // namespace

OpResult<core::ScheduleJob> ReadJobTemplate(const json::object& body, std::string_view raw,
                                            std::string_view key, const wire::FieldSet& fields,
                                            std::string_view not_object) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr || !v->is_object()) {
    return {OpStatus::kInvalidArgument, std::string(not_object)};
  }
  const json::object& o = v->as_object();
  for (const auto& field : o) {
    if (!IsOneOf(field.key(), kJobFields)) {
      return {OpStatus::kInvalidArgument, wire::UnknownField(field.key(), fields)};
    }
  }
  const json::value* payload = o.if_contains("payload");
  if (payload == nullptr) return {OpStatus::kInvalidArgument, wire::FieldRequired("payload")};
  auto text =
      PayloadTexts(raw, TextPlace{.key = key, .each = false, .inner = "payload"}).Of(*payload, 0);
  if (!text.ok()) return {text.status(), text.message()};
  core::ScheduleJob job;
  job.payload = std::move(*text);
  if (job.payload.size() > kMaxSchedulePayloadBytes) {
    return {OpStatus::kPayloadTooLarge, std::string(wire::kPayloadOver1MiB)};
  }
  auto priority = ReadInt(o, "priority", INT32_MIN, INT32_MAX);
  if (!priority.ok()) return {priority.status(), priority.message()};
  auto attempts = ReadInt(o, "max_attempts", 1, core::kMaxMaxAttempts);
  if (!attempts.ok()) return {attempts.status(), attempts.message()};
  auto group = ReadName(o, "group");
  if (!group.ok()) return {group.status(), group.message()};
  job.priority = static_cast<int32_t>(priority->value_or(0));
  job.max_attempts = static_cast<int32_t>(attempts->value_or(core::kDefaultMaxAttempts));
  job.group = group->value_or("");
  return job;
}

namespace {

// An optional time field: absent or null reads as none.
OpResult<std::optional<int64_t>> ReadTime(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return std::optional<int64_t>();
  auto at = ReadWireTime(*v, key, true);
  if (!at.ok()) return {at.status(), at.message()};
  return std::optional<int64_t>(*at);
}

}  // namespace

OpResult<core::ScheduleSpec> ReadScheduleSpec(const json::object& body, std::string_view raw) {
  for (const auto& field : body) {
    if (!IsOneOf(field.key(), kFields))
      return Invalid(wire::UnknownField(field.key(), wire::kScheduleFields));
  }
  core::ScheduleSpec spec;
  auto queue = ReadName(body, "queue");
  if (!queue.ok()) return {queue.status(), queue.message()};
  if (!*queue) return Invalid(std::string(wire::kScheduleNeedsQueue));
  spec.queue = std::move(**queue);

  auto cron = ReadString(body, "cron");
  if (!cron.ok()) return {cron.status(), cron.message()};
  auto every = ReadInt(body, "every_ms", core::kMinEveryMs, core::kLatestTimeMs);
  if (!every.ok()) return {every.status(), every.message()};
  auto tz = ReadString(body, "tz");
  if (!tz.ok()) return {tz.status(), tz.message()};
  if (cron->has_value() == every->has_value()) return Invalid(std::string(wire::kScheduleTiming));
  if (*every) {
    if (*tz) return Invalid(std::string(wire::kScheduleTzWithoutCron));
    spec.every_ms = **every;
  } else {
    spec.cron = std::move(**cron);
    if (spec.cron.empty()) return Invalid(std::string(wire::kScheduleTiming));
    if (*tz) spec.time_zone = std::move(**tz);
  }

  auto start = ReadTime(body, "start_at");
  if (!start.ok()) return {start.status(), start.message()};
  spec.start_at_ms = *start;
  auto end = ReadTime(body, "end_at");
  if (!end.ok()) return {end.status(), end.message()};
  spec.end_at_ms = *end;
  auto max_runs = ReadInt(body, "max_runs", 1, INT64_MAX);
  if (!max_runs.ok()) return {max_runs.status(), max_runs.message()};
  spec.max_runs = *max_runs;

  auto overlap = ReadString(body, "overlap");
  if (!overlap.ok()) return {overlap.status(), overlap.message()};
  if (*overlap) {
    auto o = core::OverlapNamed(**overlap);
    if (!o) return Invalid(wire::NotOneOf("overlap", wire::kOverlaps));
    spec.overlap = *o;
  }
  auto misfire = ReadString(body, "misfire");
  if (!misfire.ok()) return {misfire.status(), misfire.message()};
  if (*misfire) {
    auto m = core::MisfirePolicyNamed(**misfire);
    if (!m) return Invalid(wire::NotOneOf("misfire", wire::kMisfires));
    spec.misfire.policy = *m;
  }
  auto grace = ReadInt(body, "misfire_grace_ms", 0, core::kMaxMisfireGraceMs);
  if (!grace.ok()) return {grace.status(), grace.message()};
  spec.misfire.grace_ms = grace->value_or(core::kDefaultMisfireGraceMs);
  auto catchup = ReadInt(body, "max_catchup", 1, core::kMaxCatchup);
  if (!catchup.ok()) return {catchup.status(), catchup.message()};
  spec.misfire.max_catchup = catchup->value_or(1);
  auto jitter = ReadInt(body, "jitter_ms", 0, core::kMaxJitterMs);
  if (!jitter.ok()) return {jitter.status(), jitter.message()};
  spec.jitter_ms = jitter->value_or(0);

  auto read = ReadJobTemplate(body, raw, "job", wire::kScheduleJobFields, wire::kScheduleNeedsJob);
  if (!read.ok()) return {read.status(), read.message()};
  spec.job = std::move(*read);
  return spec;
}

json::object ScheduleJson(const core::Schedule& schedule, int64_t now_ms) {
  const core::ScheduleSpec& spec = schedule.spec;
  const core::ScheduleState& st = schedule.state;
  json::object o;
  o["id"] = schedule.id;
  o["queue"] = spec.queue;
  if (spec.cron.empty()) {
    o["every_ms"] = spec.every_ms;
  } else {
    o["cron"] = spec.cron;
    o["tz"] = spec.time_zone;
  }
  PutWireTime(o, "start_at", spec.start_at_ms);
  PutWireTime(o, "end_at", spec.end_at_ms);
  o["max_runs"] = spec.max_runs ? json::value(*spec.max_runs) : json::value(nullptr);
  o["overlap"] = core::NameOf(spec.overlap);
  o["misfire"] = core::NameOf(spec.misfire.policy);
  o["misfire_grace_ms"] = spec.misfire.grace_ms;
  o["max_catchup"] = spec.misfire.max_catchup;
  o["jitter_ms"] = spec.jitter_ms;
  json::object job;
  boost::system::error_code ec;
  job["payload"] = json::parse(spec.job.payload, ec);  // stored as serialized JSON
  job["priority"] = spec.job.priority;
  if (!spec.job.group.empty()) job["group"] = spec.job.group;
  job["max_attempts"] = spec.job.max_attempts;
  o["job"] = std::move(job);

  o["paused"] = st.paused;
  o["runs"] = st.runs_done;
  PutWireTime(o, "created_at", st.created_at_ms);
  PutWireTime(o, "updated_at", st.updated_at_ms);
  PutWireTime(o, "last_run_at", st.last_run_ms);
  o["last_job_id"] = st.last_job ? json::value(std::to_string(*st.last_job)) : json::value(nullptr);
  PutWireTime(o, "next_run_at", st.next_ms);
  if (st.next_ms && *st.next_ms > now_ms && !st.paused) o["next_run_in_ms"] = *st.next_ms - now_ms;
  json::array next;
  auto rule = core::RuleOf(spec, st.created_at_ms);
  if (rule.ok() && st.next_ms) {
    for (int64_t t :
         core::NextFireTimes(*rule, *st.next_ms - 1, st.runs_done, core::kFireTimesShown)) {
      next.push_back(json::value(FormatRfc3339Ms(t)));
    }
  }
  o["next_fire_times"] = std::move(next);
  return o;
}

}  // namespace anteroom::server
