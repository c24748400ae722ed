#include "server/queue_settings.h"

#include "common/wire_errors.h"
#include "http/json_body.h"

namespace anteroom::server {

namespace json = boost::json;
using http::ReadInt;

namespace {

OpResult<core::RateLimit> ReadRate(const json::value& v) {
  if (!v.is_object()) return {OpStatus::kInvalidArgument, std::string(wire::kQueueRateShape)};
  const json::object& o = v.as_object();
  for (const auto& field : o) {
    if (field.key() != "limit" && field.key() != "period_ms" && field.key() != "burst") {
      return {OpStatus::kInvalidArgument, wire::UnknownField(field.key(), wire::kQueueRateFields)};
    }
  }
  auto limit = ReadInt(o, "limit", 1, core::RateLimit::kMaxLimit);
  if (!limit.ok()) return {limit.status(), limit.message()};
  auto period = ReadInt(o, "period_ms", 1, core::RateLimit::kMaxPeriodMs);
  if (!period.ok()) return {period.status(), period.message()};
  auto burst = ReadInt(o, "burst", 1, core::RateLimit::kMaxBurst);
  if (!burst.ok()) return {burst.status(), burst.message()};
  if (!*limit || !*period) {
    return {OpStatus::kInvalidArgument, std::string(wire::kQueueRateShape)};
  }
  return core::RateLimit{
      .limit = **limit, .period_ms = **period, .burst = burst->value_or(**limit)};
}

}  // namespace

OpResult<core::QueueSettings> ReadQueueSettings(const json::object& body) {
  core::QueueSettings settings;
  for (const auto& field : body) {
    if (field.key() != "fairness" && field.key() != "limits" && field.key() != "keep_acked") {
      return {OpStatus::kInvalidArgument,
              wire::UnknownField(field.key(), wire::kQueueSettingsFields)};
    }
  }
  if (const json::value* f = body.if_contains("fairness")) {
    if (f->is_string() && f->as_string() == "fifo") {
      settings.limits.fairness = core::Fairness::kFifo;
    } else if (f->is_string() && f->as_string() == "round_robin") {
      settings.limits.fairness = core::Fairness::kRoundRobin;
    } else {
      return {OpStatus::kInvalidArgument, std::string(wire::kQueueFairnessShape)};
    }
  }
  if (const json::value* keep = body.if_contains("keep_acked")) {
    if (!keep->is_object()) {
      return {OpStatus::kInvalidArgument, std::string(wire::kKeepAckedShape)};
    }
    const json::object& o = keep->as_object();
    for (const auto& field : o) {
      if (field.key() != "count" && field.key() != "age_ms") {
        return {OpStatus::kInvalidArgument,
                wire::UnknownField(field.key(), wire::kKeepAckedFields)};
      }
    }
    auto count = ReadInt(o, "count", 0, core::kMaxKeepCount);
    if (!count.ok()) return {count.status(), count.message()};
    auto age = ReadInt(o, "age_ms", 1, core::kMaxKeepAgeMs);
    if (!age.ok()) return {age.status(), age.message()};
    settings.keep_acked.count = count->value_or(settings.keep_acked.count);
    settings.keep_acked.age_ms = age->value_or(settings.keep_acked.age_ms);
  }
  const json::value* limits = body.if_contains("limits");
  if (limits == nullptr) return settings;
  if (!limits->is_array() || limits->as_array().size() > 2) {
    return {OpStatus::kInvalidArgument, std::string(wire::kQueueLimitsShape)};
  }
  bool seen_group = false, seen_queue = false;
  for (const json::value& v : limits->as_array()) {
    if (!v.is_object()) return {OpStatus::kInvalidArgument, std::string(wire::kQueueLimitsShape)};
    const json::object& o = v.as_object();
    for (const auto& field : o) {
      if (field.key() != "key" && field.key() != "rate" && field.key() != "concurrency") {
        return {OpStatus::kInvalidArgument,
                wire::UnknownField(field.key(), wire::kQueueLimitFields)};
      }
    }
    const json::value* key = o.if_contains("key");
    bool per_group;
    if (key == nullptr || key->is_null()) {
      per_group = false;
    } else if (key->is_string() && key->as_string() == "group") {
      per_group = true;
    } else {
      return {OpStatus::kInvalidArgument, std::string(wire::kQueueLimitKeyShape)};
    }
    bool& seen = per_group ? seen_group : seen_queue;
    if (seen) return {OpStatus::kInvalidArgument, std::string(wire::kQueueLimitTwice)};
    seen = true;
    core::JobLimits& out = per_group ? settings.limits.per_group : settings.limits.queue;
    if (const json::value* rate = o.if_contains("rate"); rate != nullptr && !rate->is_null()) {
      auto r = ReadRate(*rate);
      if (!r.ok()) return {r.status(), r.message()};
      out.rate = *r;
    }
    auto concurrency = ReadInt(o, "concurrency", 1, core::kMaxConcurrency);
    if (!concurrency.ok()) return {concurrency.status(), concurrency.message()};
    out.concurrency = concurrency->value_or(0);
    if (!out.any()) return {OpStatus::kInvalidArgument, std::string(wire::kQueueLimitEmpty)};
  }
  return settings;
}

json::object QueueSettingsJson(const core::QueueSettings& settings) {
  const core::QueueLimits& l = settings.limits;
  json::array limits;
  auto add = [&](const core::JobLimits& j, json::value key) {
    if (!j.any()) return;
    json::object o{{"key", std::move(key)}};
    if (j.rate) {
      o["rate"] = json::object{
          {"limit", j.rate->limit}, {"period_ms", j.rate->period_ms}, {"burst", j.rate->burst}};
    }
    if (j.concurrency > 0) o["concurrency"] = j.concurrency;
    limits.push_back(std::move(o));
  };
  add(l.per_group, json::string("group"));
  add(l.queue, nullptr);
  return json::object{
      {"fairness", l.fairness == core::Fairness::kRoundRobin ? "round_robin" : "fifo"},
      {"limits", std::move(limits)},
      {"keep_acked",
       json::object{{"count", settings.keep_acked.count}, {"age_ms", settings.keep_acked.age_ms}}}};
}

}  // namespace anteroom::server
