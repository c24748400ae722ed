// Schedules of repeatable jobs over HTTP (admin scope): put, read, list, pause, resume, delete.
// The rules (timing, misfire, overlap, exactly-once runs) are the core's (core/job_schedule.h);
// bodies are read and schedules written by server/schedule_json.h. Each backend fires them.
#include <boost/json.hpp>

#include "common/wire_errors.h"
#include "server/families.h"
#include "server/preamble.h"
#include "server/schedule_json.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

// A completion answering one schedule, with `extra` fields set on it.
auto AnswerSchedule(Services& s, Respond respond, json::object extra = {}) {
  return [&clock = s.clock, respond = std::move(respond),
          extra = std::move(extra)](OpResult<core::Schedule> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    json::object o = ScheduleJson(*r, clock.NowMs());
    for (const auto& field : extra) o[field.key()] = field.value();
    respond(JsonReply(o));
  };
}

// PUT /v1/schedules/{id}: creates the schedule, or changes it (what it ran is kept).
void CmdPutSchedule(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kScheduleIds}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto spec = ReadScheduleSpec(in.body(), req.body);
  if (!spec.ok()) return respond(ErrorReply(spec));
  // The timing is checked here too, so a bad one is told before any backend is asked.
  if (auto rule = core::RuleOf(*spec, s.clock.NowMs()); !rule.ok()) {
    return respond(ErrorReply(rule));
  }
  s.backend.PutSchedule(req.params[0], std::move(*spec), AnswerSchedule(s, std::move(respond)));
}

// GET /v1/schedules/{id}: the schedule, what it ran, and its next fire times.
void CmdGetSchedule(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kScheduleIds})) return respond(std::move(*bad));
  s.backend.GetSchedule(req.params[0], AnswerSchedule(s, std::move(respond)));
}

// GET /v1/schedules: every schedule, by id.
void CmdListSchedules(Services& s, const Request&, Respond respond) {
  s.backend.ListSchedules(
      [&clock = s.clock, respond = std::move(respond)](OpResult<std::vector<core::Schedule>> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        const int64_t now = clock.NowMs();
        json::array all;
        for (const core::Schedule& schedule : *r) all.push_back(ScheduleJson(schedule, now));
        respond(JsonReply(json::object{{"schedules", std::move(all)}}));
      });
}

// POST /v1/schedules/{id}/pause: fires nothing until resumed.
void CmdPauseSchedule(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kScheduleIds})) return respond(std::move(*bad));
  s.backend.PauseSchedule(req.params[0], true, AnswerSchedule(s, std::move(respond)));
}

// POST /v1/schedules/{id}/resume: goes on from now (what passed while paused is not run).
void CmdResumeSchedule(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kScheduleIds})) return respond(std::move(*bad));
  s.backend.PauseSchedule(req.params[0], false, AnswerSchedule(s, std::move(respond)));
}

// DELETE /v1/schedules/{id}: the schedule as it was, "deleted": true. Jobs it pushed stay.
void CmdDeleteSchedule(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kScheduleIds})) return respond(std::move(*bad));
  s.backend.DeleteSchedule(req.params[0],
                           AnswerSchedule(s, std::move(respond), json::object{{"deleted", true}}));
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterJobScheduleRoutes(Router& router, Services& s) {
  using namespace route_table;
  // A schedule's job carries a payload of up to 1 MiB, as a pushed job's. (A path has one
  // limit, whatever the method: the router applies it before it knows which route.)
  constexpr size_t kBody = kMaxSchedulePayloadBytes + kDefaultBodyLimit;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/v1/schedules", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdListSchedules},
      {verb::put, "/v1/schedules/{id}", kAdmin, kBody, kNoCors, kPlain, CmdPutSchedule},
      {verb::get, "/v1/schedules/{id}", kAdmin, kBody, kNoCors, kPlain, CmdGetSchedule},
      {verb::delete_, "/v1/schedules/{id}", kAdmin, kBody, kNoCors, kPlain, CmdDeleteSchedule},
      {verb::post, "/v1/schedules/{id}/pause", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdPauseSchedule},
      {verb::post, "/v1/schedules/{id}/resume", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdResumeSchedule},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
