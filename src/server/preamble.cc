#include "server/preamble.h"

#include "common/base64url.h"
#include "common/names.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "http/json_body.h"
#include "http/websocket_options.h"

namespace anteroom::server {

std::optional<Response> BadNames(const Request& req, std::initializer_list<std::string_view> what) {
  size_t i = 0;
  for (std::string_view name : what) {
    if (i >= req.params.size() || !IsValidName(req.params[i])) {
      return ErrorReply(OpStatus::kInvalidArgument, wire::BadPathName(name));
    }
    ++i;
  }
  return std::nullopt;
}

OpResult<std::optional<std::string>> CredentialOf(const Request& req, Credential which) {
  bool session = which == Credential::kSession;
  auto header = req.fields.find(session ? "Anteroom-Session" : "Anteroom-Token");
  if (header != req.fields.end()) return std::optional<std::string>(header->value());
  if (req.websocket) {
    std::string_view prefix = session ? kSessionSubprotocol : kTokenSubprotocol;
    for (std::string_view offered : http::OfferedSubprotocols(req.fields)) {
      if (!offered.starts_with(prefix)) continue;
      std::optional<std::string> value = Base64UrlDecode(offered.substr(prefix.size()));
      if (!value) return {OpStatus::kInvalidArgument, wire::BadSubprotocol(prefix)};
      return value;
    }
  }
  if (const std::string* given = req.Query(session ? "session" : "token")) {
    return std::optional<std::string>(*given);
  }
  return std::optional<std::string>();
}

OpResult<std::string> SessionFromRequest(const Request& req, bool* created) {
  if (created != nullptr) *created = false;
  OpResult<std::optional<std::string>> given = CredentialOf(req, Credential::kSession);
  if (!given.ok()) return {given.status(), given.message()};
  if (*given) {
    if (!IsValidName(**given)) {
      return {OpStatus::kInvalidArgument, wire::BadNameField("session")};
    }
    if (auto allowed = SessionIdAllowed(req, **given); !allowed.ok()) {
      return {allowed.status(), allowed.message()};
    }
    return std::move(**given);
  }
  if (created != nullptr) *created = true;
  return NewRandomId();
}

OpResult<Done> SessionIdAllowed(const Request& req, std::string_view id) {
  if (req.admin || id.size() >= kMinClientSessionIdBytes) return Done{};
  return {OpStatus::kInvalidArgument, std::string(wire::kShortSessionId)};
}

JsonRequest::JsonRequest(const Request& req, std::initializer_list<std::string_view> names,
                         BodyRule rule)
    : error_(BadNames(req, names)),
      arena_(scratch_, sizeof scratch_),
      // Not parsed when a name is wrong: the name's error is the one answered.
      body_(error_ ? OpResult<boost::json::object>(OpStatus::kInvalidArgument, "")
                   : ParseObject(req.body, rule == BodyRule::kEmptyIsEmpty, &arena_)) {}

Response JsonRequest::Error() const { return error_ ? *error_ : ErrorReply(body_); }

}  // namespace anteroom::server
