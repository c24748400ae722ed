#include "server/session_json.h"

#include <fmt/compile.h>

#include <iterator>

namespace anteroom::server {

std::optional<std::string> AdmissionToken(std::string_view room, const core::SessionView& v,
                                          const core::TokenSigner& signer, const Clock& clock) {
  if (v.status != core::SessionStatus::kActive) return std::nullopt;
  return signer.Mint(room, v.incarnation, v.admission, clock.NowMs());
}

namespace {
template <typename It>
void AppendNullable(It it, std::string_view key, const std::optional<int64_t>& v) {
  if (v) {
    fmt::format_to(it, FMT_COMPILE("{}{}"), key, *v);
  } else {
    fmt::format_to(it, FMT_COMPILE("{}null"), key);
  }
}
}  // namespace

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
  if (v.status == core::SessionStatus::kWaiting && !v.odds) {
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
  fmt::format_to(it, FMT_COMPILE(R"(,"phase":"{}","queueing_method":"{}","refresh_after_ms":{})"),
                 core::ToString(v.phase), core::ToString(v.queueing_method), v.refresh_after_ms);
  AppendNullable(it, R"(,"starts_in_ms":)", v.starts_in_ms);
  AppendNullable(it, R"(,"ends_in_ms":)", v.ends_in_ms);
  if (v.odds) {
    fmt::format_to(it, FMT_COMPILE(R"(,"odds":{{"chance_next":{})"), v.odds->chance_next);
    AppendNullable(it, R"(,"p25_ms":)", v.odds->p25_ms);
    AppendNullable(it, R"(,"p50_ms":)", v.odds->p50_ms);
    AppendNullable(it, R"(,"p75_ms":)", v.odds->p75_ms);
    fmt::format_to(it, FMT_COMPILE("}}"));
  } else {
    fmt::format_to(it, FMT_COMPILE(R"(,"odds":null)"));
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
