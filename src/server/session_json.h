#pragma once
// A session's status object: the answer of check/touch/leave and every live "status" message.
// Written without a JSON tree (the hottest answer): every string in it is a validated name, a
// fixed status word or base64url, so nothing needs escaping.

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "common/clock.h"
#include "core/room_types.h"
#include "core/token.h"

namespace anteroom::server {

// Appends {"session",...,"token"}; `type`, when given, goes first as "type":"<type>".
// An active session's token is minted now. `show_session` false writes "session": null (an
// answer to a token, server/token_session.h).
void AppendSessionJson(fmt::memory_buffer& out, std::string_view room, const core::SessionView& v,
                       const core::TokenSigner& signer, const Clock& clock,
                       std::string_view type = {}, bool show_session = true);

}  // namespace anteroom::server
