#include "server/session_json.h"

#include <iterator>

namespace anteroom::server {

void AppendSessionJson(fmt::memory_buffer& out, std::string_view room, const core::SessionView& v,
                       const core::TokenSigner& signer, const Clock& clock, std::string_view type) {
  auto it = std::back_inserter(out);
  if (type.empty()) {
    fmt::format_to(it, "{{");
  } else {
    fmt::format_to(it, R"({{"type":"{}",)", type);
  }
  fmt::format_to(it, R"("session":"{}","status":"{}","position":)", v.session,
                 core::ToString(v.status));
  if (v.status == core::SessionStatus::kWaiting) {
    fmt::format_to(it, "{}", v.position);
  } else {
    fmt::format_to(it, "null");
  }
  fmt::format_to(it, R"(,"waiting":{},"active":{},"capacity":{},"eta_ms":)", v.waiting, v.active,
                 v.capacity);
  if (v.eta_ms) {
    fmt::format_to(it, "{}", *v.eta_ms);
  } else {
    fmt::format_to(it, "null");
  }
  if (v.status == core::SessionStatus::kActive) {
    std::string token = signer.Mint(room, v.session, v.admission, clock.NowMs());
    fmt::format_to(it, R"(,"token":"{}"}})", token);
  } else {
    fmt::format_to(it, R"(,"token":null}})");
  }
}

}  // namespace anteroom::server
