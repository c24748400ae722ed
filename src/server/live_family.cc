// The live channel over HTTP: a WebSocket or an event stream per waiting or admitted person.
// Opening one is a check-in (joining when the session is new); the hub then pushes the status.
#include "common/names.h"
#include "common/random_id.h"
#include "server/arrival.h"
#include "server/families.h"
#include "server/live_hub.h"

namespace anteroom::server {

namespace {

enum class Transport { kWebSocket, kEvents };

Handler LiveHandler(Services& s, Transport transport) {
  return [&s, transport](const Request& req, Respond respond) {
    const std::string& room = req.params[0];
    if (!IsValidName(room)) {
      return respond(
          ErrorReply(OpStatus::kInvalidArgument, "room names are 1-128 bytes of [A-Za-z0-9._:-]"));
    }
    std::string session;
    bool created = false;
    if (const std::string* given = req.Query("session")) {
      if (!IsValidName(*given)) {
        return respond(ErrorReply(OpStatus::kInvalidArgument,
                                  "'session' must be 1-128 bytes of [A-Za-z0-9._:-]"));
      }
      session = *given;
    } else {
      session = NewRandomId();
      created = true;
    }
    if (transport == Transport::kWebSocket && !req.websocket) {
      Response r = ErrorReply(OpStatus::kUpgradeRequired,
                              "this route is a WebSocket: send an Upgrade: websocket request, or "
                              "use /events for Server-Sent Events");
      r.headers.emplace_back("Upgrade", "websocket");
      return respond(std::move(r));
    }
    if (transport == Transport::kEvents && req.websocket) {
      return respond(ErrorReply(OpStatus::kInvalidArgument,
                                "this route is an event stream; WebSockets are served at /ws"));
    }
    // A new session joins the line here, under the same rules as POST /check.
    ArrivalRead arrival =
        ReadArrival(req, s, room, session, req.Query("challenge"), req.Query("solution"));
    s.backend.Check(room, session, std::move(arrival.arrival),
                    [&s, room, session, created, problem = std::move(arrival.proof_problem),
                     respond = std::move(respond)](OpResult<core::SessionView> r) {
                      if (!r.ok()) return respond(JoinRefusal(r, room, session, problem));
                      std::shared_ptr<LiveHub::NewSessionGuard> guard;
                      if (created) guard = s.live->GuardNewSession(room, r->session);
                      Response upgrade;
                      upgrade.stream = [&s, room, guard,
                                        view = std::move(*r)](std::shared_ptr<LiveStream> stream) {
                        if (guard) stream->OnFirstWritten([guard] { guard->Delivered(); });
                        s.live->Attach(room, view, std::move(stream));
                      };
                      respond(std::move(upgrade));
                    });
  };
}

}  // namespace

void RegisterLiveRoutes(Router& router, Services& s) {
  RouteOptions stream{.stream = true};
  router.Add(http::verb::get, "/v1/rooms/{room}/ws", LiveHandler(s, Transport::kWebSocket), stream);
  router.Add(http::verb::get, "/v1/rooms/{room}/events", LiveHandler(s, Transport::kEvents),
             stream);
}

}  // namespace anteroom::server
