// Waiting rooms over HTTP: configuration, check-ins, touches, leaves, evictions.
#include <boost/json.hpp>

#include <fmt/format.h>

#include <iterator>

#include "common/names.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "core/challenge.h"
#include "http/json_body.h"
#include "http/origin_policy.h"
#include "server/arrival.h"
#include "server/eta_tracer.h"
#include "server/families.h"
#include "server/gate_cache.h"
#include "server/gate_settings.h"
#include "server/page_settings.h"
#include "server/preamble.h"
#include "server/session_json.h"
#include "server/target_url.h"
#include "server/token_session.h"

namespace anteroom::server {

namespace json = boost::json;
using core::RoomInfo;
using core::SessionStatus;
using core::SessionView;

namespace {

json::value Nullable(const std::optional<int64_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

// The room setting `challenge`: null, or {"type": "pow", "difficulty": N}.
json::value ChallengeJson(const std::optional<int64_t>& difficulty) {
  if (!difficulty) return nullptr;
  return json::object{{"type", "pow"}, {"difficulty", *difficulty}};
}

// The room object. Its gate settings (bypass rules, whose header values may be partners'
// secrets; hosts; cookie domain) are the admin's: `admin` false leaves them out.
json::object RoomJson(const RoomInfo& info, bool admin) {
  json::object o{
      {"room", info.room},
      {"capacity", info.config.capacity},
      {"active", info.active},
      {"waiting", info.waiting},
      {"grace_ms", info.config.grace_ms},
      {"checkin_timeout_ms", info.config.checkin_timeout_ms},
      {"idle_timeout_ms", Nullable(info.config.idle_timeout_ms)},
      {"admit_per_minute", Nullable(info.config.admit_per_minute)},
      {"paused", info.config.paused},
      {"target_url",
       info.config.target_url ? json::value(*info.config.target_url) : json::value(nullptr)},
      {"joins_per_minute_per_client", Nullable(info.config.joins_per_minute_per_client)},
      {"places_per_client", Nullable(info.config.places_per_client)},
      {"notify_at_position", Nullable(info.config.notify_at_position)},
      {"challenge", ChallengeJson(info.config.challenge_difficulty)},
      {"queueing_method", core::ToString(info.config.queueing_method)},
      {"admitted_total", info.counters.admitted_total},
      {"dropped_total", info.counters.dropped_total},
      {"released_total", info.counters.released_total},
  };
  o["page"] = info.config.page ? PageJson(*info.config.page) : json::value(nullptr);
  if (admin) o["gate"] = info.config.gate ? GateJson(*info.config.gate) : json::value(nullptr);
  // What applies now, and why: a running event's overrides on top of the room's own settings.
  o["phase"] = core::ToString(info.phase);
  o["prequeued"] = info.prequeued;
  o["event"] = info.event ? json::value(*info.event) : json::value(nullptr);
  o["effective"] = json::object{
      {"capacity", info.effective.capacity},
      {"grace_ms", info.effective.grace_ms},
      {"checkin_timeout_ms", info.effective.checkin_timeout_ms},
      {"admit_per_minute", Nullable(info.effective.admit_per_minute)},
      {"queueing_method", core::ToString(info.effective.queueing_method)},
  };
  return o;
}

Response SessionReply(const std::string& room, const SessionView& v, Services& services,
                      bool show_session = true) {
  if (services.eta != nullptr) services.eta->OnAnswer(room, v);
  fmt::memory_buffer out;
  AppendSessionJson(out, v, AdmissionToken(room, v, services.signer, services.clock), {},
                    show_session);
  Response r;
  r.body.assign(out.data(), out.size());
  return r;
}

// Completion for touch and leave: as AnswerSession, but a session the room does not know is
// answered as one that has just left for good ("gone", with the room's counts), so an id that
// was never there cannot be told from one that was.
// `show_session` false: an answer to a token, which never names the session.
store::Completion<SessionView> AnswerSessionOrGone(std::string room, std::string id,
                                                   Respond respond, Services& services,
                                                   bool show_session = true) {
  return [room = std::move(room), id = std::move(id), respond = std::move(respond), &services,
          show_session](OpResult<SessionView> r) mutable {
    if (r.ok()) return respond(SessionReply(room, *r, services, show_session));
    if (r.status() != OpStatus::kUnknownSession) return respond(ErrorReply(r));
    services.backend.GetRoom(room, [room, id = std::move(id), respond = std::move(respond),
                                    &services, show_session](OpResult<RoomInfo> info) {
      if (!info.ok()) return respond(ErrorReply(info));
      SessionView gone;
      gone.session = id;
      gone.status = SessionStatus::kGone;
      gone.waiting = info->waiting;
      gone.active = info->active;
      gone.capacity = info->effective.capacity;  // in force: a running event's, if any
      gone.phase = info->phase;
      gone.queueing_method = info->effective.queueing_method;
      respond(SessionReply(room, gone, services, show_session));
    });
  };
}

// Completion that answers a SessionView (or the error) as JSON.
store::Completion<SessionView> AnswerSession(std::string room, Respond respond,
                                             Services& services) {
  return
      [room = std::move(room), respond = std::move(respond), &services](OpResult<SessionView> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        respond(SessionReply(room, *r, services));
      };
}

store::Completion<RoomInfo> AnswerRoom(Respond respond, bool admin) {
  return [respond = std::move(respond), admin](OpResult<RoomInfo> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    respond(JsonReply(RoomJson(*r, admin)));
  };
}

// `challenge`: absent (keep), null (off), or {"type": "pow", "difficulty"?: N}.
OpResult<std::optional<std::optional<int64_t>>> ReadChallenge(const json::object& body) {
  using Out = std::optional<std::optional<int64_t>>;
  const json::value* v = body.if_contains("challenge");
  if (v == nullptr) return Out();
  if (v->is_null()) return Out(std::optional<int64_t>());
  const std::string shape(wire::kChallengeShape);
  if (!v->is_object()) return {OpStatus::kInvalidArgument, shape};
  const json::object& o = v->as_object();
  const json::value* type = o.if_contains("type");
  if (type == nullptr || !type->is_string() || type->as_string() != "pow") {
    return {OpStatus::kInvalidArgument, shape};
  }
  for (const auto& field : o) {
    if (field.key() != "type" && field.key() != "difficulty") {
      return {OpStatus::kInvalidArgument, shape};
    }
  }
  auto difficulty =
      ReadInt(o, "difficulty", core::kMinChallengeDifficulty, core::kMaxChallengeDifficulty);
  if (!difficulty.ok())
    return {difficulty.status(), wire::InField("challenge", difficulty.message())};
  return Out(difficulty->value_or(core::kDefaultChallengeDifficulty));
}

OpResult<core::RoomPatch> ReadPatch(const json::object& body) {
  core::RoomPatch patch;
  auto capacity = ReadInt(body, "capacity", 1, core::kMaxCapacity);
  if (!capacity.ok()) return {capacity.status(), capacity.message()};
  auto grace = ReadInt(body, "grace_ms", 0, core::kMaxDurationMs);
  if (!grace.ok()) return {grace.status(), grace.message()};
  auto checkin = ReadInt(body, "checkin_timeout_ms", 0, core::kMaxDurationMs);
  if (!checkin.ok()) return {checkin.status(), checkin.message()};
  auto idle = ReadNullableInt(body, "idle_timeout_ms", 0, core::kMaxDurationMs);
  if (!idle.ok()) return {idle.status(), idle.message()};
  auto rate = ReadNullableInt(body, "admit_per_minute", 1, core::kMaxAdmitPerMinute);
  if (!rate.ok()) return {rate.status(), rate.message()};
  auto paused = ReadBool(body, "paused");
  if (!paused.ok()) return {paused.status(), paused.message()};
  auto joins =
      ReadNullableInt(body, "joins_per_minute_per_client", 1, core::kMaxJoinsPerMinutePerClient);
  if (!joins.ok()) return {joins.status(), joins.message()};
  auto places = ReadNullableInt(body, "places_per_client", 1, core::kMaxPlacesPerClient);
  if (!places.ok()) return {places.status(), places.message()};
  auto near = ReadNullableInt(body, "notify_at_position", 1, core::kMaxNotifyAtPosition);
  if (!near.ok()) return {near.status(), near.message()};
  auto challenge = ReadChallenge(body);
  if (!challenge.ok()) return {challenge.status(), challenge.message()};
  if (const json::value* url = body.if_contains("target_url")) {
    if (url->is_null()) {
      patch.target_url.emplace();  // null clears it
    } else if (!url->is_string()) {
      return {OpStatus::kInvalidArgument, std::string(wire::kTargetUrlType)};
    } else {
      auto checked = CheckTargetUrl(url->as_string());
      if (!checked.ok()) return {checked.status(), checked.message()};
      patch.target_url = std::optional<std::string>(std::string(url->as_string()));
    }
  }
  patch.capacity = *capacity;
  patch.grace_ms = *grace;
  patch.checkin_timeout_ms = *checkin;
  patch.idle_timeout_ms = *idle;
  patch.admit_per_minute = *rate;
  patch.paused = *paused;
  patch.joins_per_minute_per_client = *joins;
  patch.places_per_client = *places;
  patch.notify_at_position = *near;
  patch.challenge_difficulty = *challenge;
  if (const json::value* method = body.if_contains("queueing_method")) {
    auto parsed =
        method->is_string() ? core::ParseQueueingMethod(method->as_string()) : std::nullopt;
    if (!parsed) return {OpStatus::kInvalidArgument, std::string(wire::kQueueingMethodShape)};
    patch.queueing_method = *parsed;
  }
  auto include_active = ReadBool(body, "include_active");
  if (!include_active.ok()) return {include_active.status(), include_active.message()};
  patch.include_active = include_active->value_or(false);
  if (patch.include_active && patch.queueing_method != core::QueueingMethod::kQueueAll) {
    return {OpStatus::kInvalidArgument, std::string(wire::kIncludeActiveNeedsQueueAll)};
  }
  if (const json::value* gate = body.if_contains("gate")) {
    if (gate->is_null()) {
      patch.gate.emplace();  // null clears them
    } else {
      auto text = CanonicalGateText(*gate);
      if (!text.ok()) return {text.status(), text.message()};
      patch.gate = std::optional<std::string>(std::move(*text));
    }
  }
  if (const json::value* page = body.if_contains("page")) {
    if (page->is_null()) {
      patch.page.emplace();  // null clears them
    } else {
      auto text = CanonicalPageText(*page, "page");
      if (!text.ok()) return {text.status(), text.message()};
      patch.page = std::optional<std::string>(std::move(*text));
    }
  }
  return patch;
}

// Reads {"session": name} (required) and optionally "final".
struct SessionBody {
  std::string session;
  bool final = false;
};
OpResult<SessionBody> ReadSessionBody(const Request& req, const json::object& body,
                                      bool with_final) {
  auto session = ReadName(body, "session");
  if (!session.ok()) return {session.status(), session.message()};
  if (!*session) return {OpStatus::kInvalidArgument, wire::FieldRequired("session")};
  if (auto allowed = SessionIdAllowed(req, **session); !allowed.ok()) {
    return {allowed.status(), allowed.message()};
  }
  SessionBody out{std::move(**session)};
  if (with_final) {
    auto final = ReadBool(body, "final");
    if (!final.ok()) return {final.status(), final.message()};
    out.final = final->value_or(false);
  }
  return out;
}

// --- Handlers: each reads the request, makes one backend call, writes the answer ---------------

// PUT /v1/rooms/{room}: creates the room or changes the settings sent.
void CmdPutRoom(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto patch = ReadPatch(in.body());
  if (!patch.ok()) return respond(ErrorReply(patch));
  s.backend.PutRoom(req.params[0], *patch,
                    [origins = s.origins, gate = s.gate, room = req.params[0],
                     respond = std::move(respond)](OpResult<RoomInfo> r) {
                      if (gate != nullptr) gate->Forget(room);  // its settings, at once
                      // Pages of the room's site may call it from now on (origin_policy.h).
                      if (r.ok() && origins != nullptr) {
                        const auto& url = r->config.target_url;
                        origins->NoteRoom(room, url ? OriginOfUrl(*url) : std::nullopt);
                      }
                      AnswerRoom(std::move(respond), /*admin=*/true)(std::move(r));
                    });
}

// GET /v1/rooms/{room}: settings and counters.
void CmdGetRoom(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  s.backend.GetRoom(req.params[0], AnswerRoom(std::move(respond), req.admin));
}

// DELETE /v1/rooms/{room}: the room as it was, with "deleted": true.
void CmdDeleteRoom(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  s.backend.DeleteRoom(req.params[0],
                       [origins = s.origins, gate = s.gate, room = req.params[0], admin = req.admin,
                        respond = std::move(respond)](OpResult<RoomInfo> r) {
                         if (gate != nullptr) gate->Forget(room);
                         if (!r.ok()) return respond(ErrorReply(r));
                         if (origins != nullptr) origins->NoteRoom(room, std::nullopt);
                         json::object o = RoomJson(*r, admin);
                         o["deleted"] = true;
                         respond(JsonReply(o));
                       });
}

// GET /v1/rooms: every room.
void CmdListRooms(Services& s, const Request& req, Respond respond) {
  s.backend.ListRooms(
      [admin = req.admin, respond = std::move(respond)](OpResult<std::vector<RoomInfo>> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        json::array rooms;
        for (const auto& info : *r) rooms.push_back(RoomJson(info, admin));
        respond(JsonReply(json::object{{"rooms", std::move(rooms)}}));
      });
}

// A check with {"token"} instead of a session: activity of the session holding the token's
// admission, never a join; the status says "session": null, and "gone" once nobody holds it
// (server/token_session.h).
void CheckByToken(Services& s, const std::string& room, std::string_view token, Respond respond) {
  SessionOfToken(s, room, token,
                 [&s, room, respond = std::move(respond)](
                     OpResult<std::optional<std::string>> holder) mutable {
                   if (!holder.ok()) return respond(ErrorReply(holder));
                   std::string session = holder->value_or("");
                   auto answer = AnswerSessionOrGone(room, session, std::move(respond), s,
                                                     /*show_session=*/false);
                   if (session.empty())
                     return answer(OpResult<SessionView>(OpStatus::kUnknownSession, ""));
                   s.backend.Touch(room, session, std::move(answer));
                 });
}

}  // namespace

void CheckSession(Services& s, const Request& req, const std::string& room, std::string id,
                  const std::string* nonce, const std::string* solution,
                  std::optional<std::string> pass, Respond respond) {
  ArrivalRead arrival = ReadArrival(req, s, room, id, nonce, solution);
  if (pass) arrival.arrival.pass = std::move(*pass);
  s.backend.Check(room, id, std::move(arrival.arrival),
                  [room, id, problem = std::move(arrival.proof_problem),
                   respond = std::move(respond), &s](OpResult<SessionView> r) {
                    if (!r.ok()) return respond(JoinRefusal(r, room, id, problem));
                    respond(SessionReply(room, *r, s));
                  });
}

namespace {

// POST /v1/rooms/{room}/check: joins (a new or absent session) or checks in; the status.
// {"token"} instead of "session": CheckByToken.
void CmdCheck(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames}, BodyRule::kEmptyIsEmpty);
  if (!in.ok()) return respond(in.Error());
  auto session = ReadName(in.body(), "session");
  if (!session.ok()) return respond(ErrorReply(session));
  auto token = ReadString(in.body(), "token");
  if (!token.ok()) return respond(ErrorReply(token));
  if (*token) {
    if (*session) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kTokenOrSession));
    return CheckByToken(s, req.params[0], **token, std::move(respond));
  }
  auto nonce = ReadString(in.body(), "challenge");
  if (!nonce.ok()) return respond(ErrorReply(nonce));
  auto solution = ReadString(in.body(), "solution");
  if (!solution.ok()) return respond(ErrorReply(solution));
  auto pass = ReadString(in.body(), "pass");
  if (!pass.ok()) return respond(ErrorReply(pass));
  if (*pass && (*pass)->size() > core::kMaxPassCodeBytes) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kPassNotValid));
  }
  if (*session) {
    if (auto allowed = SessionIdAllowed(req, **session); !allowed.ok()) {
      return respond(ErrorReply(allowed));
    }
  }
  std::string id = *session ? std::move(**session) : NewRandomId();
  CheckSession(s, req, req.params[0], std::move(id), nonce->has_value() ? &**nonce : nullptr,
               solution->has_value() ? &**solution : nullptr, std::move(*pass), std::move(respond));
}

// GET /v1/rooms/{room}/challenge, naming a session (a header or ?session=, CredentialOf): a
// proof-of-work puzzle for joining the room as the session (core/challenge.h). Without one the
// server names one, to be used for the join.
void CmdChallenge(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  OpResult<std::string> session = SessionFromRequest(req);
  if (!session.ok()) return respond(ErrorReply(session));
  if (s.puzzles == nullptr) {
    return respond(ErrorReply(OpStatus::kUnavailable, wire::kNoChallenges));
  }
  s.backend.GetRoom(req.params[0], [room = req.params[0], session = std::move(*session),
                                    respond = std::move(respond), &s](OpResult<RoomInfo> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    json::object out{{"room", room}, {"session", session}};
    const std::optional<int64_t>& difficulty = r->config.challenge_difficulty;
    if (!difficulty) {
      out["type"] = nullptr;
      return respond(JsonReply(out));
    }
    // 72 random bits (12 base64url characters): puzzles differ; the tag makes them safe.
    core::PowPuzzles::Puzzle p = s.puzzles->Issue(
        room, session, s.clock.NowMs(), NewRandomId().substr(0, core::PowPuzzles::kRandomBytes));
    out["type"] = "pow";
    out["algorithm"] = "sha256-leading-zero-bits";
    out["difficulty"] = *difficulty;
    out["nonce"] = p.nonce;
    out["expires_ms"] = p.expires_ms;
    out["expires_in_ms"] = core::PowPuzzles::kLifetimeMs;  // for clients whose clock differs
    respond(JsonReply(out));
  });
}

// POST /v1/rooms/{room}/touch: {"session"}: the session is still there (no check-in needed).
void CmdTouch(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto body = ReadSessionBody(req, in.body(), false);
  if (!body.ok()) return respond(ErrorReply(body));
  std::string id = body->session;
  s.backend.Touch(req.params[0], std::move(body->session),
                  AnswerSessionOrGone(req.params[0], std::move(id), std::move(respond), s));
}

// POST /v1/rooms/{room}/leave: {"session", "final"?}: leaves (for good with "final").
void CmdLeave(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto body = ReadSessionBody(req, in.body(), true);
  if (!body.ok()) return respond(ErrorReply(body));
  std::string id = body->session;
  s.backend.Leave(req.params[0], std::move(body->session), body->final,
                  AnswerSessionOrGone(req.params[0], std::move(id), std::move(respond), s));
}

// DELETE /v1/rooms/{room}/sessions/{session}: evicts the session.
void CmdEndSession(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames, wire::kSessionIds})) {
    return respond(std::move(*bad));
  }
  s.backend.EndSession(req.params[0], req.params[1],
                       AnswerSession(req.params[0], std::move(respond), s));
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterRoomRoutes(Router& router, Services& s) {
  using namespace route_table;
  constexpr size_t kBody = kDefaultBodyLimit;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::put, "/v1/rooms/{room}", kAdmin, kBody, kNoCors, kPlain, CmdPutRoom},
      {verb::get, "/v1/rooms/{room}", kPublic, kBody, kCorsPublic, kPlain, CmdGetRoom},
      {verb::delete_, "/v1/rooms/{room}", kAdmin, kBody, kNoCors, kPlain, CmdDeleteRoom},
      {verb::get, "/v1/rooms", kPublic, kBody, kNoCors, kPlain, CmdListRooms},
      {verb::post, "/v1/rooms/{room}/check", kSession, kBody, kCorsPublic, kPlain, CmdCheck},
      {verb::get, "/v1/rooms/{room}/challenge", kSession, kBody, kCorsPublic, kPlain, CmdChallenge},
      {verb::post, "/v1/rooms/{room}/touch", kSession, kBody, kCorsPublic, kPlain, CmdTouch},
      {verb::post, "/v1/rooms/{room}/leave", kSession, kBody, kCorsPublic, kPlain, CmdLeave},
      {verb::delete_, "/v1/rooms/{room}/sessions/{session}", kAdmin, kBody, kNoCors, kPlain,
       CmdEndSession},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
