// Reliable queues over HTTP: push, fetch (with long polls), ack/nack/extend, workers, dead
// letters, stats. Payloads are stored as the JSON text their clients sent (payload_text.h) and
// written back verbatim.
#include <boost/json.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>

#include "common/names.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "http/json_body.h"
#include "server/families.h"
#include "server/payload_text.h"
#include "server/preamble.h"
#include "server/queue_keys.h"
#include "server/queue_settings.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

constexpr size_t kMaxPayloadBytes = 1024 * 1024;
constexpr size_t kMaxQueueBody = 16 * 1024 * 1024;
constexpr int64_t kMaxWaitMs = 60'000;
constexpr int64_t kMaxTtlMs = 604'800'000;

json::object StatsJson(const std::string& name, const core::QueueStats& s) {
  return json::object{{"queue", name},        {"waiting_deps", s.waiting}, {"ready", s.ready},
                      {"delayed", s.delayed}, {"inflight", s.inflight},    {"dead", s.dead},
                      {"pushed", s.pushed},   {"acked", s.acked},          {"nacked", s.nacked},
                      {"expired", s.expired}, {"cancelled", s.cancelled},  {"workers", s.workers},
                      {"paused", s.paused}};
}

std::optional<core::JobId> ParseJobId(const json::value& v) {
  if (v.is_int64() && v.as_int64() > 0) return static_cast<core::JobId>(v.as_int64());
  if (v.is_uint64()) return v.as_uint64();
  if (v.is_string()) {
    core::JobId id = 0;
    std::string_view s = v.as_string();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
    if (ec == std::errc() && end == s.data() + s.size() && id > 0) return id;
  }
  return std::nullopt;
}

// One job object of a push: {"payload", "delay_ms"?, "priority"?, "dedupe_key"?, "max_attempts"?,
// "group"?, "depends_on"?, "on_dependency_failure"?, "batch"?}
// Errors name the field only; a batch adds which job (wire::JobAt). `index`: the job's place in
// the body, whose payload text `texts` gives.
OpResult<core::JobSpec> ReadJob(const json::value& v, PayloadTexts& texts, size_t index) {
  if (!v.is_object()) return {OpStatus::kInvalidArgument, std::string(wire::kJobNotObject)};
  const json::object& o = v.as_object();
  const json::value* payload = o.if_contains("payload");
  if (payload == nullptr) return {OpStatus::kInvalidArgument, wire::FieldRequired("payload")};
  core::JobSpec spec;
  auto text = texts.Of(*payload, index);
  if (!text.ok()) return {text.status(), text.message()};
  spec.payload = std::move(*text);
  if (spec.payload.size() > kMaxPayloadBytes) {
    return {OpStatus::kPayloadTooLarge, std::string(wire::kPayloadOver1MiB)};
  }
  auto delay = ReadInt(o, "delay_ms", 0, core::kMaxDurationMs);
  if (!delay.ok()) return {delay.status(), delay.message()};
  auto priority = ReadInt(o, "priority", INT32_MIN, INT32_MAX);
  if (!priority.ok()) return {priority.status(), priority.message()};
  auto attempts = ReadInt(o, "max_attempts", 1, core::kMaxMaxAttempts);
  if (!attempts.ok()) return {attempts.status(), attempts.message()};
  auto dedupe = ReadName(o, "dedupe_key");
  if (!dedupe.ok()) return {dedupe.status(), dedupe.message()};
  auto group = ReadName(o, "group");
  if (!group.ok()) return {group.status(), group.message()};
  spec.group = group->value_or("");
  spec.delay_ms = delay->value_or(0);
  spec.priority = static_cast<int32_t>(priority->value_or(0));
  spec.max_attempts = static_cast<int32_t>(attempts->value_or(core::kDefaultMaxAttempts));
  spec.dedupe_key = *dedupe;
  if (const json::value* deps = o.if_contains("depends_on")) {
    if (!deps->is_array() || deps->as_array().empty() ||
        deps->as_array().size() > core::kMaxDependencies) {
      return {OpStatus::kInvalidArgument, std::string(wire::kDependsOnShape)};
    }
    for (const json::value& d : deps->as_array()) {
      std::optional<core::JobId> id = ParseJobId(d);
      if (!id ||
          std::find(spec.depends_on.begin(), spec.depends_on.end(), *id) != spec.depends_on.end()) {
        return {OpStatus::kInvalidArgument, std::string(wire::kDependsOnShape)};
      }
      spec.depends_on.push_back(*id);
    }
  }
  auto batch = ReadName(o, "batch");
  if (!batch.ok()) return {batch.status(), batch.message()};
  spec.batch = batch->value_or("");
  if (const json::value* f = o.if_contains("on_dependency_failure")) {
    if (f->is_string() && f->as_string() == "ignore") {
      spec.ignore_failed_dependencies = true;
    } else if (!f->is_string() || f->as_string() != "fail") {
      return {OpStatus::kInvalidArgument, std::string(wire::kOnDependencyFailureShape)};
    }
  }
  return spec;
}

// The jobs of a push body: {"jobs": [job, ...]} (1 to 1000, all or nothing) or one job.
// `raw`: the body's text, whose payloads are stored as sent.
OpResult<std::vector<core::JobSpec>> ReadJobs(const json::object& body, std::string_view raw,
                                              bool batch) {
  std::vector<core::JobSpec> specs;
  PayloadTexts texts(raw, batch);
  if (!batch) {
    auto spec = ReadJob(body, texts, 0);
    if (!spec.ok()) return {spec.status(), spec.message()};
    specs.push_back(std::move(*spec));
    return specs;
  }
  const json::value& jobs = body.at("jobs");
  if (!jobs.is_array() || jobs.as_array().empty() || jobs.as_array().size() > core::kMaxBatch) {
    return {OpStatus::kInvalidArgument, std::string(wire::kJobsCount)};
  }
  specs.reserve(jobs.as_array().size());
  for (size_t i = 0; i < jobs.as_array().size(); ++i) {
    auto spec = ReadJob(jobs.as_array()[i], texts, i);
    if (!spec.ok()) return {spec.status(), wire::JobAt(i, spec.message())};
    specs.push_back(std::move(*spec));
  }
  return specs;
}

// body[key]: an array of lease strings, 1 to 1000 (0 allowed when `may_be_empty`).
OpResult<std::vector<std::string>> ReadLeases(const json::object& body,
                                              std::string_view key = "leases",
                                              bool may_be_empty = false) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr || !v->is_array()) {
    return {OpStatus::kInvalidArgument, wire::LeasesNotArray(key)};
  }
  const json::array& a = v->as_array();
  if ((a.empty() && !may_be_empty) || a.size() > core::kMaxBatch) {
    return {OpStatus::kInvalidArgument, wire::LeasesCount(key, may_be_empty ? 0 : 1)};
  }
  std::vector<std::string> leases;
  leases.reserve(a.size());
  for (const json::value& l : a) {
    if (!l.is_string()) {
      return {OpStatus::kInvalidArgument, std::string(wire::kLeaseNotString)};
    }
    leases.emplace_back(l.as_string());
  }
  return leases;
}

// Appends [{"lease","ok","code"?}, ...]. Leases come from clients, so any that is not plain
// lease text is escaped as JSON.
void AppendOutcomes(std::string& out, const std::vector<std::string>& leases,
                    const std::vector<core::LeaseOutcome>& outcomes) {
  auto it = std::back_inserter(out);
  out += '[';
  for (size_t i = 0; i < leases.size() && i < outcomes.size(); ++i) {
    if (i) out += ',';
    const std::string& lease = leases[i];
    bool plain = std::all_of(lease.begin(), lease.end(), [](char c) {  // ASCII, no locale
      return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
             c == '.' || c == '-' || c == '_';
    });
    out += R"({"lease":)";
    if (plain) {
      out.append(1, '"').append(lease).append(1, '"');
    } else {
      out += json::serialize(json::value(lease));
    }
    if (outcomes[i] == core::LeaseOutcome::kOk) {
      out += R"(,"ok":true})";
    } else {
      fmt::format_to(it, FMT_COMPILE(R"(,"ok":false,"code":"{}"}})"), core::ToString(outcomes[i]));
    }
  }
  out += ']';
}

// body[key]: absent (none), or one JSON value per lease (null: none), each kept as its text
// (numbers as sent, as payloads: `raw` is the body's text), at most core::kMaxResultBytes.
OpResult<std::vector<std::string>> ReadResults(const json::object& body, std::string_view raw,
                                               std::string_view key, size_t leases,
                                               std::string_view shape) {
  std::vector<std::string> results;
  const json::value* v = body.if_contains(key);
  if (v == nullptr) return results;
  if (!v->is_array() || v->as_array().size() != leases) {
    return {OpStatus::kInvalidArgument, std::string(shape)};
  }
  results.reserve(leases);
  PayloadTexts texts(raw, TextPlace{.key = key, .each = true, .inner = ""});
  for (const json::value& r : v->as_array()) {
    if (HoldsNonFinite(r)) return {OpStatus::kInvalidArgument, std::string(wire::kReportNotFinite)};
    if (r.is_null()) {
      results.emplace_back();
      continue;
    }
    auto text = texts.Of(r, results.size());
    if (!text.ok()) return {text.status(), text.message()};
    results.push_back(std::move(*text));
    if (results.back().size() > core::kMaxResultBytes) {
      return {OpStatus::kPayloadTooLarge, std::string(wire::kResultOver64KiB)};
    }
  }
  return results;
}

// body["lease"]: one lease string.
OpResult<std::string> ReadOneLease(const json::object& body) {
  const json::value* v = body.if_contains("lease");
  if (v == nullptr || !v->is_string()) {
    return {OpStatus::kInvalidArgument, std::string(wire::kLeaseRequired)};
  }
  return std::string(v->as_string());
}

// {"ok": true} or {"ok": false, "code": "lease_lost" | "invalid_lease"}: one lease's outcome, as
// AppendOutcomes writes each.
store::Completion<core::LeaseOutcome> AnswerOutcome(Respond respond) {
  return [respond = std::move(respond)](OpResult<core::LeaseOutcome> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    if (*r == core::LeaseOutcome::kOk) return respond(JsonReply(json::object{{"ok", true}}));
    respond(JsonReply(json::object{{"ok", false}, {"code", core::ToString(*r)}}));
  };
}

store::Completion<std::vector<core::LeaseOutcome>> AnswerOutcomes(std::vector<std::string> leases,
                                                                  Respond respond) {
  return [leases = std::move(leases),
          respond = std::move(respond)](OpResult<std::vector<core::LeaseOutcome>> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    Response res;
    res.body.reserve(32 + leases.size() * 48);
    res.body = R"({"results":)";
    AppendOutcomes(res.body, leases, *r);
    res.body += '}';
    respond(std::move(res));
  };
}

Response CountReply(size_t n) { return JsonReply(json::object{{"count", n}}); }

// --- Handlers: each reads the request, makes one backend call, writes the answer ---------------

// POST /v1/queues/{q}/jobs: one job, or {"jobs": [...]}. 201 when any job was created, 200
// when every one was a dedupe hit.
void CmdPush(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  bool batch = in.body().contains("jobs");
  auto specs = ReadJobs(in.body(), req.body, batch);
  if (!specs.ok()) return respond(ErrorReply(specs));
  s.backend.Push(req.params[0], std::move(*specs),
                 [batch, respond = std::move(respond)](OpResult<std::vector<core::PushResult>> r) {
                   if (!r.ok()) return respond(ErrorReply(r));
                   if (r->empty())
                     return respond(ErrorReply(OpStatus::kInternal, wire::kPushAnsweredNothing));
                   bool any_created = false;
                   Response res;
                   std::string& out = res.body;
                   out.reserve(16 + r->size() * 24);
                   auto it = std::back_inserter(out);
                   if (batch) {
                     out += R"({"ids":[)";
                     for (size_t i = 0; i < r->size(); ++i) {
                       fmt::format_to(it, FMT_COMPILE(R"({}"{}")"), i ? "," : "", (*r)[i].id);
                       any_created = any_created || (*r)[i].created;
                     }
                     out += ']';
                   } else {
                     fmt::format_to(it, FMT_COMPILE(R"({{"id":"{}")"), (*r)[0].id);
                     any_created = (*r)[0].created;
                   }
                   out += '}';
                   res.status = any_created ? 201 : 200;  // all dedupe hits: 200
                   respond(std::move(res));
                 });
}

// POST /v1/queues/{q}/fetch: up to `max` jobs leased to `worker`, waiting up to `wait_ms` (a
// long poll); `ack` acknowledges earlier leases in the same call.
void CmdFetch(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  const json::object& body = in.body();
  auto worker = ReadName(body, "worker");
  if (!worker.ok()) return respond(ErrorReply(worker));
  if (!*worker)
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::FieldRequired("worker")));
  auto max = ReadInt(body, "max", 1, static_cast<int64_t>(core::kMaxBatch));
  if (!max.ok()) return respond(ErrorReply(max));
  auto lease = ReadInt(body, "lease_ms", core::kMinLeaseMs, core::kMaxLeaseMs);
  if (!lease.ok()) return respond(ErrorReply(lease));
  auto wait = ReadInt(body, "wait_ms", 0, kMaxWaitMs);
  if (!wait.ok()) return respond(ErrorReply(wait));
  auto reclaim = ReadBool(body, "reclaim");
  if (!reclaim.ok()) return respond(ErrorReply(reclaim));
  core::FetchRequest request{.worker = std::move(**worker),
                             .max = static_cast<size_t>(max->value_or(1)),
                             .lease_ms = lease->value_or(core::kDefaultLeaseMs),
                             .wait_ms = wait->value_or(0),
                             .ack = {},
                             .ack_results = {},
                             .reclaim = reclaim->value_or(false),
                             .hangup = req.hangup};
  bool acking = body.contains("ack");
  if (acking) {
    auto ack = ReadLeases(body, "ack", /*may_be_empty=*/true);
    if (!ack.ok()) return respond(ErrorReply(ack));
    request.ack = std::move(*ack);
  }
  auto ack_results =
      ReadResults(body, req.body, "ack_results", request.ack.size(), wire::kAckResultsShape);
  if (!ack_results.ok()) return respond(ErrorReply(ack_results));
  request.ack_results = std::move(*ack_results);
  bool reclaiming = request.reclaim;
  s.backend.Fetch(
      req.params[0], std::move(request),
      [acking, reclaiming, respond = std::move(respond)](OpResult<core::FetchAnswer> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        // Written by hand: payloads are stored serialized and go out verbatim.
        Response res;
        std::string& out = res.body;
        out.reserve(64 + r->jobs.size() * 128 + r->acked_leases.size() * 48);
        auto it = std::back_inserter(out);
        out += R"({"jobs":[)";
        bool first = true;
        for (const auto& d : r->jobs) {
          if (!first) out += ',';
          fmt::format_to(it,
                         FMT_COMPILE(R"({{"id":"{}","payload":{},"attempt":{},"lease":"{}",)"
                                     R"("lease_expires_ms":{},"priority":{})"),
                         d.id, d.payload, d.attempt, d.lease, d.lease_expires_ms, d.priority);
          // A group is a name (common/names.h): nothing in it needs escaping.
          if (!d.group.empty()) fmt::format_to(it, FMT_COMPILE(R"(,"group":"{}")"), d.group);
          out += '}';
          first = false;
        }
        out += ']';
        if (acking) {
          out += R"(,"acked":)";
          AppendOutcomes(out, r->acked_leases, r->acked);
        }
        if (reclaiming) fmt::format_to(it, R"(,"reclaimed":{})", r->reclaimed);
        out += '}';
        respond(std::move(res));
      });
}

// POST /v1/queues/{q}/ack: {"leases": [...], "results"?: [...]}, an outcome per lease. A result
// (any JSON value; null: none) is kept with its job for GET .../jobs/{id}.
void CmdAck(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto leases = ReadLeases(in.body());
  if (!leases.ok()) return respond(ErrorReply(leases));
  auto results = ReadResults(in.body(), req.body, "results", leases->size(), wire::kResultsShape);
  if (!results.ok()) return respond(ErrorReply(results));
  std::vector<std::string> copy = *leases;
  s.backend.Ack(req.params[0], std::move(*leases), std::move(*results),
                AnswerOutcomes(copy, std::move(respond)));
}

// POST /v1/queues/{q}/progress: {"lease", "progress"}: the job of a current lease reports how
// far it got (any JSON value, at most 4 KiB), replacing what it said before.
void CmdProgress(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto lease = ReadOneLease(in.body());
  if (!lease.ok()) return respond(ErrorReply(lease));
  const json::value* progress = in.body().if_contains("progress");
  if (progress == nullptr) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::FieldRequired("progress")));
  }
  if (HoldsNonFinite(*progress)) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kReportNotFinite));
  }
  auto text = PayloadTexts(req.body, TextPlace{.key = "progress", .each = false, .inner = ""})
                  .Of(*progress, 0);
  if (!text.ok()) return respond(ErrorReply(text));
  if (text->size() > core::kMaxProgressBytes) {
    return respond(ErrorReply(OpStatus::kPayloadTooLarge, wire::kProgressOver4KiB));
  }
  s.backend.SetProgress(req.params[0], std::move(*lease), std::move(*text),
                        AnswerOutcome(std::move(respond)));
}

// POST /v1/queues/{q}/log: {"lease", "lines": [...]}: the job of a current lease appends to its
// log (each line kept to 1 KiB, the last 100 lines kept).
void CmdAppendLog(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto lease = ReadOneLease(in.body());
  if (!lease.ok()) return respond(ErrorReply(lease));
  const json::value* v = in.body().if_contains("lines");
  if (v == nullptr || !v->is_array() || v->as_array().empty() ||
      v->as_array().size() > core::kKeptLogLines) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kLogLinesShape));
  }
  std::vector<std::string> lines;
  for (const json::value& line : v->as_array()) {
    if (!line.is_string() || line.as_string().size() > 64 * 1024) {
      return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kLogLinesShape));
    }
    lines.emplace_back(line.as_string());
  }
  s.backend.AppendJobLog(req.params[0], std::move(*lease), std::move(lines),
                         AnswerOutcome(std::move(respond)));
}

// POST /v1/queues/{q}/nack: {"leases", "delay_ms"?, "error"?}: the jobs go back (or die).
// With {"rate_limited": true, "retry_after_ms"} the worker was told to slow down: a snooze (the
// attempt is not used up, the job's group waits retry_after_ms; store/backend.h Snooze).
void CmdNack(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto leases = ReadLeases(in.body());
  if (!leases.ok()) return respond(ErrorReply(leases));
  auto rate_limited = ReadBool(in.body(), "rate_limited");
  if (!rate_limited.ok()) return respond(ErrorReply(rate_limited));
  auto retry_after = ReadInt(in.body(), "retry_after_ms", 0, core::kBackoffCapMs);
  if (!retry_after.ok()) return respond(ErrorReply(retry_after));
  if (rate_limited->value_or(false)) {
    if (!*retry_after) {
      return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kRateLimitedNeedsRetryAfter));
    }
    std::vector<std::string> copy = *leases;
    return s.backend.Snooze(req.params[0], std::move(*leases), **retry_after,
                            AnswerOutcomes(copy, std::move(respond)));
  }
  if (*retry_after) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kRetryAfterNeedsRateLimited));
  }
  auto delay = ReadInt(in.body(), "delay_ms", 0, core::kMaxDurationMs);
  if (!delay.ok()) return respond(ErrorReply(delay));
  auto error = ReadString(in.body(), "error");
  if (!error.ok()) return respond(ErrorReply(error));
  std::vector<std::string> copy = *leases;
  s.backend.Nack(req.params[0], std::move(*leases), *delay, error->value_or(""),
                 AnswerOutcomes(copy, std::move(respond)));
}

// POST /v1/queues/{q}/extend: {"leases", "lease_ms"?}: the leases run longer.
void CmdExtend(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto leases = ReadLeases(in.body());
  if (!leases.ok()) return respond(ErrorReply(leases));
  auto lease_ms = ReadInt(in.body(), "lease_ms", core::kMinLeaseMs, core::kMaxLeaseMs);
  if (!lease_ms.ok()) return respond(ErrorReply(lease_ms));
  std::vector<std::string> copy = *leases;
  s.backend.Extend(req.params[0], std::move(*leases), lease_ms->value_or(core::kDefaultLeaseMs),
                   AnswerOutcomes(copy, std::move(respond)));
}

// GET /v1/queues: every queue's stats.
void CmdListQueues(Services& s, const Request&, Respond respond) {
  s.backend.ListQueues([respond = std::move(respond)](
                           OpResult<std::vector<std::pair<std::string, core::QueueStats>>> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    json::array queues;
    for (const auto& [name, stats] : *r) queues.push_back(StatsJson(name, stats));
    respond(JsonReply(json::object{{"queues", std::move(queues)}}));
  });
}

// GET /v1/queues/{q}: one queue's stats.
void CmdGetQueue(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  s.backend.GetQueue(req.params[0], [name = req.params[0],
                                     respond = std::move(respond)](OpResult<core::QueueStats> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    respond(JsonReply(StatsJson(name, *r)));
  });
}

// GET /v1/queues/{q}/inflight[?worker=W]: the leased jobs (of one worker).
void CmdInflight(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  std::optional<std::string> worker;
  if (const std::string* w = req.Query("worker")) {
    if (!IsValidName(*w)) {
      return respond(ErrorReply(OpStatus::kInvalidArgument, wire::BadNameField("worker")));
    }
    worker = *w;
  }
  s.backend.Inflight(req.params[0], worker,
                     [respond = std::move(respond)](OpResult<std::vector<core::InflightJob>> r) {
                       if (!r.ok()) return respond(ErrorReply(r));
                       json::array jobs;
                       for (const auto& j : *r) {
                         jobs.push_back(json::object{{"id", std::to_string(j.id)},
                                                     {"worker", j.worker},
                                                     {"attempt", j.attempt},
                                                     {"lease_expires_ms", j.lease_expires_ms}});
                       }
                       respond(JsonReply(json::object{{"jobs", std::move(jobs)}}));
                     });
}

// POST /v1/queues/{q}/workers/{w}/heartbeat: {"ttl_ms"}: the worker is alive that long.
void CmdHeartbeat(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames, wire::kWorkerNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto ttl = ReadInt(in.body(), "ttl_ms", 1, kMaxTtlMs);
  if (!ttl.ok()) return respond(ErrorReply(ttl));
  if (!*ttl) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::FieldRequired("ttl_ms")));
  s.backend.Heartbeat(req.params[0], req.params[1], **ttl,
                      [respond = std::move(respond)](OpResult<Done> r) {
                        if (!r.ok()) return respond(ErrorReply(r));
                        respond(JsonReply(json::object{{"ok", true}}));
                      });
}

// POST /v1/queues/{q}/workers/{w}/release: the worker's leases go back now; their count.
void CmdReleaseWorker(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames, wire::kWorkerNames})) {
    return respond(std::move(*bad));
  }
  s.backend.ReleaseWorker(req.params[0], req.params[1],
                          [respond = std::move(respond)](OpResult<size_t> r) {
                            if (!r.ok()) return respond(ErrorReply(r));
                            respond(CountReply(*r));
                          });
}

// POST /v1/queues/{q}/pause and /resume: the queue's stats after the change.
void SetPaused(Services& s, const Request& req, Respond respond, bool pause) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  s.backend.SetPaused(req.params[0], pause,
                      [&s, name = req.params[0], respond = std::move(respond)](OpResult<Done> r) {
                        if (!r.ok()) return respond(ErrorReply(r));
                        s.backend.GetQueue(name, [name, respond](OpResult<core::QueueStats> st) {
                          if (!st.ok()) return respond(ErrorReply(st));
                          respond(JsonReply(StatsJson(name, *st)));
                        });
                      });
}
void CmdPause(Services& s, const Request& req, Respond respond) {
  SetPaused(s, req, std::move(respond), true);
}
void CmdResume(Services& s, const Request& req, Respond respond) {
  SetPaused(s, req, std::move(respond), false);
}

// Whether `key` may be a queue's key: it travels in an Authorization header, so visible ASCII
// without spaces, and long enough not to be guessed.
bool IsQueueKeyShape(std::string_view key) {
  if (key.size() < 16 || key.size() > 256) return false;
  for (unsigned char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// PUT /v1/queues/{q}/key: {"key"?}: the queue's own key (server/queue_keys.h); without "key"
// the server makes one (256 random bits) and answers it, once: only its digest is kept.
void CmdPutQueueKey(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kEmptyIsEmpty);
  if (!in.ok()) return respond(in.Error());
  auto given = ReadString(in.body(), "key");
  if (!given.ok()) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kQueueKeyShape));
  const bool made = !given->has_value();
  std::string key = made ? NewRandomId() + NewRandomId() : std::move(**given);
  if (!IsQueueKeyShape(key)) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kQueueKeyShape));
  }
  std::string digest = KeyDigest(key);
  s.backend.SetQueueKey(
      req.params[0], digest,
      [&s, name = req.params[0], digest, key = made ? std::move(key) : std::string(),
       respond = std::move(respond)](OpResult<Done> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        if (s.queue_keys != nullptr) s.queue_keys->Note(name, digest);
        json::object out{{"queue", name}, {"own_key", true}};
        if (!key.empty()) out["key"] = key;
        respond(JsonReply(out));
      });
}

// DELETE /v1/queues/{q}/key: the queue follows the server's rule again.
void CmdDeleteQueueKey(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  s.backend.SetQueueKey(req.params[0], std::nullopt,
                        [&s, name = req.params[0], respond = std::move(respond)](OpResult<Done> r) {
                          if (!r.ok()) return respond(ErrorReply(r));
                          if (s.queue_keys != nullptr) s.queue_keys->Note(name, std::nullopt);
                          respond(JsonReply(json::object{{"queue", name}, {"own_key", false}}));
                        });
}

// PUT /v1/queues/{q}/settings: limits and fairness (server/queue_settings.h), all of them:
// what the body leaves out goes back to its default. Answers the settings now in force.
void CmdPutQueueSettings(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kEmptyIsEmpty);
  if (!in.ok()) return respond(in.Error());
  auto settings = ReadQueueSettings(in.body());
  if (!settings.ok()) return respond(ErrorReply(settings));
  s.backend.SetQueueSettings(
      req.params[0], *settings,
      [name = req.params[0], settings = *settings, respond = std::move(respond)](OpResult<Done> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        json::object out = QueueSettingsJson(settings);
        out.emplace("queue", name);
        respond(JsonReply(out));
      });
}

// GET /v1/queues/{q}/settings: the defaults for a queue nobody set them for.
void CmdGetQueueSettings(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  s.backend.GetQueueSettings(req.params[0], [name = req.params[0], respond = std::move(respond)](
                                                OpResult<core::QueueSettings> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    json::object out = QueueSettingsJson(*r);
    out.emplace("queue", name);
    respond(JsonReply(out));
  });
}

// Appends the job's history: [{"attempt","error","at_ms"}, ...], as the dead list shows it.
void AppendHistory(std::string& out, const std::vector<core::FailedAttempt>& history) {
  auto it = std::back_inserter(out);
  out += '[';
  for (size_t k = 0; k < history.size(); ++k) {
    const auto& h = history[k];
    fmt::format_to(it, FMT_COMPILE(R"({}{{"attempt":{},"error":{},"at_ms":{}}})"), k ? "," : "",
                   h.attempt, json::serialize(json::string_view(h.error)), h.at_ms);
  }
  out += ']';
}

// GET /v1/queues/{q}/dead[?limit=N]: dead letters with their failure history.
void CmdDead(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  size_t limit = 100;
  if (const std::string* l = req.Query("limit")) {
    size_t n = 0;
    auto [end, ec] = std::from_chars(l->data(), l->data() + l->size(), n);
    if (ec != std::errc() || end != l->data() + l->size() || n < 1 || n > 10'000) {
      return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kDeadLimit));
    }
    limit = n;
  }
  s.backend.Dead(
      req.params[0], limit, [respond = std::move(respond)](OpResult<std::vector<core::DeadJob>> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        // Written by hand, as the fetch answer: the payloads go out as stored.
        Response res;
        std::string& out = res.body;
        auto it = std::back_inserter(out);
        out += R"({"jobs":[)";
        for (size_t i = 0; i < r->size(); ++i) {
          const core::DeadJob& d = (*r)[i];
          fmt::format_to(it,
                         FMT_COMPILE(R"({}{{"id":"{}","payload":{},"attempts":{},"error":{},)"
                                     R"("failed_at_ms":{},"history":)"),
                         i ? "," : "", d.id, d.payload, d.attempts,
                         json::serialize(json::string_view(d.error)), d.failed_at_ms);
          AppendHistory(out, d.history);
          out += '}';
        }
        out += "]}";
        respond(std::move(res));
      });
}

// POST /v1/queues/{q}/dead/requeue: {"ids"?: [...]} (all when absent); the count requeued.
void CmdRequeueDead(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kEmptyIsEmpty);
  if (!in.ok()) return respond(in.Error());
  std::optional<std::vector<core::JobId>> ids;
  if (const json::value* v = in.body().if_contains("ids")) {
    if (!v->is_array() || v->as_array().size() > 10'000) {
      return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kIdsNotJobIds));
    }
    ids.emplace();
    for (const json::value& id : v->as_array()) {
      auto parsed = ParseJobId(id);
      if (!parsed) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kIdsNotJobIds));
      ids->push_back(*parsed);
    }
  }
  s.backend.RequeueDead(req.params[0], std::move(ids),
                        [respond = std::move(respond)](OpResult<size_t> r) {
                          if (!r.ok()) return respond(ErrorReply(r));
                          respond(CountReply(*r));
                        });
}

// The job as GET /v1/queues/{q}/jobs/{id} answers it. Payload, progress and result are stored
// as JSON text and go out as they are.
std::string JobJson(const core::JobView& v) {
  std::string out;
  out.reserve(256 + v.payload.size());
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 FMT_COMPILE(R"({{"id":"{}","state":"{}","payload":{},"priority":{},)"
                             R"("attempts":{},"max_attempts":{})"),
                 v.id, core::ToString(v.state), v.payload, v.priority, v.attempts, v.max_attempts);
  if (!v.group.empty()) fmt::format_to(it, FMT_COMPILE(R"(,"group":"{}")"), v.group);
  if (!v.batch.empty()) fmt::format_to(it, FMT_COMPILE(R"(,"batch":"{}")"), v.batch);
  switch (v.state) {
    case core::JobState::kDelayed:
      fmt::format_to(it, FMT_COMPILE(R"(,"ready_at_ms":{})"), v.due_ms);
      break;
    case core::JobState::kInflight:
      fmt::format_to(it, FMT_COMPILE(R"(,"lease_expires_ms":{})"), v.due_ms);
      break;
    case core::JobState::kAcked:
    case core::JobState::kDead:
    case core::JobState::kCancelled:
      fmt::format_to(it, FMT_COMPILE(R"(,"finished_at_ms":{})"), v.finished_ms);
      break;
    case core::JobState::kWaitingDeps:
    case core::JobState::kReady:
      break;
  }
  if (!v.history.empty()) {
    out += R"(,"last_error":)";
    out += json::serialize(json::string_view(v.history.back().error));
  }
  if (!v.depends_on.empty()) {
    out += R"(,"depends_on":[)";
    for (size_t k = 0; k < v.depends_on.size(); ++k) {
      fmt::format_to(it, FMT_COMPILE(R"({}"{}")"), k ? "," : "", v.depends_on[k]);
    }
    fmt::format_to(it, FMT_COMPILE(R"(],"waiting_on":{})"), v.waiting_on);
  }
  out += R"(,"history":)";
  AppendHistory(out, v.history);
  if (v.progress) out.append(R"(,"progress":)").append(*v.progress);
  if (v.result) out.append(R"(,"result":)").append(*v.result);
  out += R"(,"log":[)";
  for (size_t k = 0; k < v.log.size(); ++k) {
    fmt::format_to(it, FMT_COMPILE(R"({}{{"at_ms":{},"line":{}}})"), k ? "," : "", v.log[k].at_ms,
                   json::serialize(json::string_view(v.log[k].text)));
  }
  fmt::format_to(it, FMT_COMPILE(R"(],"log_dropped":{}}})"), v.log_dropped);
  return out;
}

// GET /v1/queues/{q}/jobs/{id}: one job wherever it is; a finished one while the queue keeps it.
void CmdGetJob(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  auto id = ParseJobId(json::value(req.params[1]));
  if (!id) return respond(ErrorReply(OpStatus::kUnknownJob, wire::kNoSuchJob));
  s.backend.GetJob(req.params[0], *id, [respond = std::move(respond)](OpResult<core::JobView> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    Response res;
    res.body = JobJson(*r);
    respond(std::move(res));
  });
}

// GET /v1/queues/{q}/jobs/{id}/dependencies: what became of the jobs it waits or waited on, with
// their results: {"dependencies": [{"id", "state", "result"?}]}.
void CmdGetJobDependencies(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  auto id = ParseJobId(json::value(req.params[1]));
  if (!id) return respond(ErrorReply(OpStatus::kUnknownJob, wire::kNoSuchJob));
  s.backend.GetJobDependencies(
      req.params[0], *id,
      [respond = std::move(respond)](OpResult<std::vector<core::DependencyView>> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        Response res;
        std::string& out = res.body;
        auto it = std::back_inserter(out);
        out += R"({"dependencies":[)";
        for (size_t k = 0; k < r->size(); ++k) {
          const core::DependencyView& d = (*r)[k];
          fmt::format_to(it, FMT_COMPILE(R"({}{{"id":"{}","state":"{}")"), k ? "," : "", d.id,
                         core::ToString(d.state));
          if (d.result) out.append(R"(,"result":)").append(*d.result);
          out += '}';
        }
        out += "]}";
        respond(std::move(res));
      });
}

// DELETE /v1/queues/{q}/jobs/{id}: cancels a job that is not in flight.
void CmdCancel(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
  auto id = ParseJobId(json::value(req.params[1]));
  if (!id) return respond(ErrorReply(OpStatus::kUnknownJob, wire::kNoSuchJob));
  s.backend.Cancel(req.params[0], *id,
                   [respond = std::move(respond)](OpResult<core::CancelOutcome> r) {
                     if (!r.ok()) return respond(ErrorReply(r));
                     switch (*r) {
                       case core::CancelOutcome::kCancelled:
                         return respond(CountReply(1));
                       case core::CancelOutcome::kUnknown:
                         return respond(ErrorReply(OpStatus::kUnknownJob, wire::kNoSuchJob));
                       case core::CancelOutcome::kInFlight:
                         return respond(ErrorReply(OpStatus::kConflict, wire::kJobInFlight));
                     }
                   });
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterQueueRoutes(Router& router, Services& s) {
  using namespace route_table;
  constexpr size_t kBody = kMaxQueueBody;  // batches of jobs
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::post, "/v1/queues/{q}/jobs", kQueue, kBody, kNoCors, kPlain, CmdPush},
      {verb::post, "/v1/queues/{q}/fetch", kQueue, kBody, kNoCors, kParks, CmdFetch},
      {verb::post, "/v1/queues/{q}/ack", kQueue, kBody, kNoCors, kPlain, CmdAck},
      {verb::post, "/v1/queues/{q}/nack", kQueue, kBody, kNoCors, kPlain, CmdNack},
      {verb::post, "/v1/queues/{q}/extend", kQueue, kBody, kNoCors, kPlain, CmdExtend},
      {verb::get, "/v1/queues", kQueue, kDefaultBodyLimit, kNoCors, kPlain, CmdListQueues},
      {verb::get, "/v1/queues/{q}", kQueue, kBody, kNoCors, kPlain, CmdGetQueue},
      {verb::get, "/v1/queues/{q}/inflight", kQueue, kBody, kNoCors, kPlain, CmdInflight},
      {verb::post, "/v1/queues/{q}/workers/{w}/heartbeat", kQueue, kBody, kNoCors, kPlain,
       CmdHeartbeat},
      {verb::post, "/v1/queues/{q}/workers/{w}/release", kAdmin, kBody, kNoCors, kPlain,
       CmdReleaseWorker},
      {verb::post, "/v1/queues/{q}/pause", kAdmin, kBody, kNoCors, kPlain, CmdPause},
      {verb::put, "/v1/queues/{q}/settings", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdPutQueueSettings},
      {verb::get, "/v1/queues/{q}/settings", kQueue, kDefaultBodyLimit, kNoCors, kPlain,
       CmdGetQueueSettings},
      {verb::put, "/v1/queues/{q}/key", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdPutQueueKey},
      {verb::delete_, "/v1/queues/{q}/key", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdDeleteQueueKey},
      {verb::post, "/v1/queues/{q}/resume", kAdmin, kBody, kNoCors, kPlain, CmdResume},
      {verb::get, "/v1/queues/{q}/dead", kQueue, kBody, kNoCors, kPlain, CmdDead},
      {verb::post, "/v1/queues/{q}/dead/requeue", kAdmin, kBody, kNoCors, kPlain, CmdRequeueDead},
      {verb::delete_, "/v1/queues/{q}/jobs/{id}", kAdmin, kBody, kNoCors, kPlain, CmdCancel},
      {verb::get, "/v1/queues/{q}/jobs/{id}", kQueue, kBody, kNoCors, kPlain, CmdGetJob},
      {verb::get, "/v1/queues/{q}/jobs/{id}/dependencies", kQueue, kBody, kNoCors, kPlain,
       CmdGetJobDependencies},
      {verb::post, "/v1/queues/{q}/progress", kQueue, kBody, kNoCors, kPlain, CmdProgress},
      {verb::post, "/v1/queues/{q}/log", kQueue, kBody, kNoCors, kPlain, CmdAppendLog},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
