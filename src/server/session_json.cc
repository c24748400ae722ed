#include "server/session_json.h"

#include <fmt/compile.h>

#include <iterator>

namespace anteroom::server {

std::optional<std::string> AdmissionToken(std::string_view room, const core::SessionView& v,
                                          const core::TokenSigner& signer, const Clock& clock) {
  if (v.status != core::SessionStatus::kActive) return std::nullopt;
  return signer.Mint(room, v.incarnation, v.admission, clock.NowMs());
}

// Compiled formats: the live channel writes one of these per client per change.
void AppendSessionJson(fmt::memory_buffer& out, const core::SessionView& v,
                       const std::optional<std::string>& token, std::string_view type,
                       bool show_session) {
  auto it = std::back_inserter(out);
  if (type.empty()) {
    fmt::format_to(it, FMT_COMPILE("{{"));
  } else {
    fmt::format_to(it, FMT_COMPILE(R"({{"type":"{}",)"), type);
  }
  if (show_session) {
    fmt::format_to(it, FMT_COMPILE(R"("session":"{}",)"), v.session);
  } else {
    fmt::format_to(it, FMT_COMPILE(R"("session":null,)"));
  }
  fmt::format_to(it, FMT_COMPILE(R"("status":"{}","position":)"), core::ToString(v.status));
  if (v.status == core::SessionStatus::kWaiting) {
    fmt::format_to(it, FMT_COMPILE("{}"), v.position);
  } else {
    fmt::format_to(it, FMT_COMPILE("null"));
  }
  fmt::format_to(it, FMT_COMPILE(R"(,"waiting":{},"active":{},"capacity":{},"eta_ms":)"), v.waiting,
                 v.active, v.capacity);
  if (v.eta_ms) {
    fmt::format_to(it, FMT_COMPILE("{}"), *v.eta_ms);
  } else {
    fmt::format_to(it, FMT_COMPILE("null"));
  }
  if (token) {
    fmt::format_to(it, FMT_COMPILE(R"(,"token":"{}"}})"), *token);
  } else {
    fmt::format_to(it, FMT_COMPILE(R"(,"token":null}})"));
  }
}

void HideSession(std::string& message) {
  // AppendSessionJson wrote the field: the id holds no quote to skip.
  constexpr std::string_view kField = R"("session":")";
  size_t at = message.find(kField);
  size_t end = at == std::string::npos ? at : message.find('"', at + kField.size());
  if (end != std::string::npos) message.replace(at, end + 1 - at, R"("session":null)");
}

}  // namespace anteroom::server
