// The live channel over HTTP: a WebSocket or an event stream per waiting or admitted person.
// Opening one is a check-in (joining when the session is new); the hub then pushes the status.
#include "common/names.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "server/arrival.h"
#include "server/families.h"
#include "server/live_hub.h"
#include "server/preamble.h"
#include "server/session_json.h"
#include "server/token_session.h"

namespace anteroom::server {

namespace {

enum class Transport { kWebSocket, kEvents };

// A token instead of a session: the live stream of the session holding the token's admission,
// which never joins and never names the session (server/token_session.h). A token whose
// admission is over is refused: the client's fallback (a check with the token) hears "gone".
void LiveByToken(Services& s, const Request& req, const std::string& token, Respond respond) {
  std::string room = req.params[0];
  SessionOfToken(
      s, room, token,
      [&s, room,
       respond = std::move(respond)](OpResult<std::optional<std::string>> holder) mutable {
        if (!holder.ok()) return respond(ErrorReply(holder));
        if (!*holder) return respond(ErrorReply(OpStatus::kUnknownSession, wire::kTokenNotHeld));
        s.backend.Touch(
            room, **holder,
            [&s, room, respond = std::move(respond)](OpResult<core::SessionView> r) mutable {
              if (!r.ok()) return respond(ErrorReply(r));
              Response upgrade;
              upgrade.stream = [&s, room,
                                view = std::move(*r)](std::shared_ptr<LiveStream> stream) {
                stream->FilterMessages(HideSession);
                s.live->Attach(room, view, std::move(stream));
              };
              respond(std::move(upgrade));
            });
      });
}

// GET /v1/rooms/{room}/ws and /events, naming a session or a token (server/preamble.h,
// CredentialOf: a header, a subprotocol, or the query): the live stream of the session's status.
void Live(Services& s, const Request& req, Respond respond, Transport transport) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  const std::string& room = req.params[0];
  OpResult<std::optional<std::string>> token = CredentialOf(req, Credential::kToken);
  if (!token.ok()) return respond(ErrorReply(token));
  OpResult<std::optional<std::string>> named = CredentialOf(req, Credential::kSession);
  if (!named.ok()) return respond(ErrorReply(named));
  if (*token && *named) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kTokenOrSession));
  }
  bool created = false;
  OpResult<std::string> given =
      *token ? OpResult<std::string>(std::string()) : SessionFromRequest(req, &created);
  if (!given.ok()) return respond(ErrorReply(given));
  std::string session = std::move(*given);
  if (transport == Transport::kWebSocket && !req.websocket) {
    Response r = ErrorReply(OpStatus::kUpgradeRequired, wire::kNotWebSocket);
    r.headers.emplace_back("Upgrade", "websocket");
    return respond(std::move(r));
  }
  if (transport == Transport::kEvents && req.websocket) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kNotEventStream));
  }
  if (*token) return LiveByToken(s, req, **token, std::move(respond));
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
}

void CmdWebSocket(Services& s, const Request& req, Respond respond) {
  Live(s, req, std::move(respond), Transport::kWebSocket);
}
void CmdEvents(Services& s, const Request& req, Respond respond) {
  Live(s, req, std::move(respond), Transport::kEvents);
}

}  // namespace

void RegisterLiveRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/v1/rooms/{room}/ws", kSession, kDefaultBodyLimit, kCorsPublic, kStream,
       CmdWebSocket},
      {verb::get, "/v1/rooms/{room}/events", kSession, kDefaultBodyLimit, kCorsPublic, kStream,
       CmdEvents},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
