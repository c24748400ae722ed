// A room's scheduled events over HTTP (admin scope): schedule, read, change, cancel. The rules
// (times in order, no overlap, at most 100, what a started event may change) are the core's
// (core/schedule.h); bodies are read and events written by server/event_json.h.
#include <boost/json.hpp>

#include <algorithm>

#include "common/wire_errors.h"
#include "server/event_json.h"
#include "server/families.h"
#include "server/preamble.h"

namespace anteroom::server {

namespace json = boost::json;
using core::RoomEvent;

namespace {

// PUT /v1/rooms/{room}/schedule/{id}: schedules the event, or changes it.
void CmdPutEvent(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames, wire::kEventIds}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto spec = ReadEventSpec(in.body());
  if (!spec.ok()) return respond(ErrorReply(spec));
  s.backend.PutEvent(req.params[0], req.params[1], std::move(*spec),
                     [&clock = s.clock, respond = std::move(respond)](OpResult<RoomEvent> r) {
                       if (!r.ok()) return respond(ErrorReply(r));
                       respond(JsonReply(EventJson(*r, clock.NowMs())));
                     });
}

// GET /v1/rooms/{room}/schedule/{id}: the event, its phase and, after its start, its draw.
void CmdGetEvent(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames, wire::kEventIds})) {
    return respond(std::move(*bad));
  }
  s.backend.ListEvents(
      req.params[0], [&clock = s.clock, id = req.params[1],
                      respond = std::move(respond)](OpResult<std::vector<RoomEvent>> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        auto it = std::find_if(r->begin(), r->end(), [&](const auto& e) { return e.id == id; });
        if (it == r->end()) return respond(ErrorReply(OpStatus::kNotFound, wire::UnknownEvent(id)));
        respond(JsonReply(EventJson(*it, clock.NowMs())));
      });
}

// GET /v1/rooms/{room}/schedule: every event of the room, in time order.
void CmdListEvents(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  s.backend.ListEvents(req.params[0], [&clock = s.clock, respond = std::move(respond)](
                                          OpResult<std::vector<RoomEvent>> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    int64_t now = clock.NowMs();
    json::array events;
    for (const RoomEvent& e : *r) events.push_back(EventJson(e, now));
    respond(JsonReply(json::object{{"events", std::move(events)}}));
  });
}

// DELETE /v1/rooms/{room}/schedule/{id}: cancels it; the event as it was, "deleted": true.
void CmdDeleteEvent(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames, wire::kEventIds})) {
    return respond(std::move(*bad));
  }
  s.backend.DeleteEvent(req.params[0], req.params[1],
                        [&clock = s.clock, respond = std::move(respond)](OpResult<RoomEvent> r) {
                          if (!r.ok()) return respond(ErrorReply(r));
                          json::object o = EventJson(*r, clock.NowMs());
                          o["deleted"] = true;
                          respond(JsonReply(o));
                        });
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterScheduleRoutes(Router& router, Services& s) {
  using namespace route_table;
  constexpr size_t kBody = kDefaultBodyLimit;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::put, "/v1/rooms/{room}/schedule/{id}", kAdmin, kBody, kNoCors, kPlain, CmdPutEvent},
      {verb::get, "/v1/rooms/{room}/schedule/{id}", kAdmin, kBody, kNoCors, kPlain, CmdGetEvent},
      {verb::delete_, "/v1/rooms/{room}/schedule/{id}", kAdmin, kBody, kNoCors, kPlain,
       CmdDeleteEvent},
      {verb::get, "/v1/rooms/{room}/schedule", kAdmin, kBody, kNoCors, kPlain, CmdListEvents},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
