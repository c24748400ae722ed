#pragma once
// A session's status object: the answer of check/touch/leave and every live "status" message.
// Written without a JSON tree (the hottest answer): every string in it is a validated name, a
// fixed status word or base64url, so nothing needs escaping.

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "core/room_types.h"
#include "core/token.h"

namespace anteroom::server {

// The admission token of a session's answer: minted now for an active session, none otherwise.
// Apart from the formatter, so formatting never signs anything.
std::optional<std::string> AdmissionToken(std::string_view room, const core::SessionView& v,
                                          const core::TokenSigner& signer, const Clock& clock);

// Appends {"session",...,"token"} with `token` (AdmissionToken) or null; `type`, when given,
// goes first as "type":"<type>". `show_session` false writes "session": null (an answer to a
// token, server/token_session.h).
void AppendSessionJson(fmt::memory_buffer& out, const core::SessionView& v,
                       const std::optional<std::string>& token, std::string_view type = {},
                       bool show_session = true);

// A status message as a live stream opened with a token shows it: "session": null
// (server/token_session.h). The hub writes one message per session for all of its streams, so
// each such stream rewrites its copy (LiveStream::FilterMessages).
void HideSession(std::string& message);

}  // namespace anteroom::server
