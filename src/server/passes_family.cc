// A room's passes over HTTP (admin scope): mint, list, revoke. Redemption is a check's
// "pass" (rooms_family.cc), the gate's `?pass=` and anteroom.js's; the rules are the core's
// (core/room_pass.h).
#include <boost/json.hpp>

#include "common/wire_errors.h"
#include "core/room_pass.h"
#include "http/json_body.h"
#include "server/event_json.h"
#include "server/families.h"
#include "server/preamble.h"

namespace anteroom::server {

namespace json = boost::json;
using core::RoomPass;

namespace {

// A pass as listed (never its code: the room does not keep it).
json::object PassJson(const RoomPass& p) {
  json::object o{
      {"id", p.id}, {"kind", core::ToString(p.kind)}, {"uses", p.uses}, {"uses_left", p.uses_left}};
  PutWireTime(o, "expires_at", p.expires_at);
  PutWireTime(o, "created_at", p.created_at);
  return o;
}

OpResult<core::PassMint> ReadMint(const json::object& body) {
  for (const auto& field : body) {
    std::string_view key = field.key();
    if (key != "count" && key != "uses" && key != "expires_at" && key != "kind") {
      return {OpStatus::kInvalidArgument, wire::UnknownField(key, wire::kPassFields)};
    }
  }
  core::PassMint mint;
  auto count = ReadInt(body, "count", 1, core::kMaxPassesPerMint);
  if (!count.ok()) return {count.status(), count.message()};
  auto uses = ReadInt(body, "uses", 1, core::kMaxPassUses);
  if (!uses.ok()) return {uses.status(), uses.message()};
  auto kind = ReadString(body, "kind");
  if (!kind.ok()) return {kind.status(), kind.message()};
  if (*kind) {
    auto parsed = core::ParsePassKind(**kind);
    if (!parsed) return {OpStatus::kInvalidArgument, std::string(wire::kPassKindShape)};
    mint.kind = *parsed;
  }
  if (const json::value* at = body.if_contains("expires_at"); at && !at->is_null()) {
    auto ms = ReadWireTime(*at, "expires_at", /*nullable=*/true);
    if (!ms.ok()) return {ms.status(), ms.message()};
    mint.expires_at = *ms;
  }
  mint.count = count->value_or(1);
  mint.uses = uses->value_or(1);
  return mint;
}

// POST /v1/rooms/{room}/passes: mints passes; their codes are in this answer only.
void CmdMintPasses(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames}, BodyRule::kEmptyIsEmpty);
  if (!in.ok()) return respond(in.Error());
  auto mint = ReadMint(in.body());
  if (!mint.ok()) return respond(ErrorReply(mint));
  s.backend.MintPasses(req.params[0], *mint,
                       [respond = std::move(respond)](OpResult<std::vector<core::MintedPass>> r) {
                         if (!r.ok()) return respond(ErrorReply(r));
                         json::array passes;
                         for (const core::MintedPass& m : *r) {
                           json::object o = PassJson(m.pass);
                           o["code"] = m.code;
                           passes.push_back(std::move(o));
                         }
                         respond(JsonReply(json::object{{"passes", std::move(passes)}}, 201));
                       });
}

// GET /v1/rooms/{room}/passes: every pass, by creation, with its uses left.
void CmdListPasses(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  s.backend.ListPasses(req.params[0],
                       [respond = std::move(respond)](OpResult<std::vector<RoomPass>> r) {
                         if (!r.ok()) return respond(ErrorReply(r));
                         json::array passes;
                         for (const RoomPass& p : *r) passes.push_back(PassJson(p));
                         respond(JsonReply(json::object{{"passes", std::move(passes)}}));
                       });
}

void AnswerRevoked(OpResult<int64_t> r, const Respond& respond) {
  if (!r.ok()) return respond(ErrorReply(r));
  respond(JsonReply(json::object{{"revoked", *r}}));
}

// DELETE /v1/rooms/{room}/passes/{id}: revokes one.
void CmdRevokePass(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames, wire::kPassIds})) {
    return respond(std::move(*bad));
  }
  s.backend.RevokePasses(req.params[0], req.params[1],
                         [respond = std::move(respond)](OpResult<int64_t> r) {
                           AnswerRevoked(std::move(r), respond);
                         });
}

// DELETE /v1/rooms/{room}/passes: revokes every pass of the room.
void CmdRevokeAllPasses(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  s.backend.RevokePasses(req.params[0], std::nullopt,
                         [respond = std::move(respond)](OpResult<int64_t> r) {
                           AnswerRevoked(std::move(r), respond);
                         });
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterPassRoutes(Router& router, Services& s) {
  using namespace route_table;
  constexpr size_t kBody = kDefaultBodyLimit;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::post, "/v1/rooms/{room}/passes", kAdmin, kBody, kNoCors, kPlain, CmdMintPasses},
      {verb::get, "/v1/rooms/{room}/passes", kAdmin, kBody, kNoCors, kPlain, CmdListPasses},
      {verb::delete_, "/v1/rooms/{room}/passes/{id}", kAdmin, kBody, kNoCors, kPlain,
       CmdRevokePass},
      {verb::delete_, "/v1/rooms/{room}/passes", kAdmin, kBody, kNoCors, kPlain,
       CmdRevokeAllPasses},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
