#include "server/page_settings.h"

#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "common/ascii.h"
#include "common/uri_shape.h"
#include "common/wire_errors.h"
#include "core/room_types.h"

namespace anteroom::server {

namespace json = boost::json;
namespace urls = boost::urls;

namespace {

constexpr std::string_view kFields[] = {"title",  "message",  "logo_url",
                                        "colors", "language", "template"};
constexpr std::string_view kColors[] = {"background", "text", "accent"};

// Text without control characters (a newline only where `lines`); JSON strings are UTF-8.
bool IsText(std::string_view s, size_t max, bool lines) {
  if (s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), [lines](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u != 0x7f) || (lines && c == '\n');
  });
}

bool IsLogoUrl(std::string_view url) {
  if (url.empty() || url.size() > core::kMaxTargetUrlBytes) return false;
  if (!IsText(url, core::kMaxTargetUrlBytes, false)) return false;
  if (url.front() == '/') {
    auto ref = urls::parse_relative_ref(url);
    return ref && !ref->has_authority();  // "//host" is another origin
  }
  auto uri = urls::parse_uri(url);
  return uri && uri->scheme_id() == urls::scheme::https && uri->has_authority() &&
         !uri->encoded_host().empty() && !uri->has_userinfo() && PathFollowsAuthority(*uri);
}

bool IsColor(std::string_view s) {
  return s.size() == 7 && s[0] == '#' &&
         std::all_of(s.begin() + 1, s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

bool IsTemplateName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '_' || c == '-'; });
}

OpResult<Done> Refuse(std::string message) {
  return {OpStatus::kInvalidArgument, std::move(message)};
}

}  // namespace

PageSettings PageSettings::Over(const PageSettings& over) const {
  PageSettings out = *this;
  auto take = [](std::optional<std::string>& to, const std::optional<std::string>& from) {
    if (from) to = from;
  };
  take(out.title, over.title);
  take(out.message, over.message);
  take(out.logo_url, over.logo_url);
  take(out.background, over.background);
  take(out.text, over.text);
  take(out.accent, over.accent);
  take(out.language, over.language);
  take(out.template_name, over.template_name);
  return out;
}

bool IsPageLanguage(std::string_view lang) {
  return std::find(kPageLanguages.begin(), kPageLanguages.end(), lang) != kPageLanguages.end();
}

OpResult<std::string> CanonicalPageText(const json::value& page, std::string_view key) {
  const std::string k(key);
  if (!page.is_object()) return {OpStatus::kInvalidArgument, wire::PageShape(key)};
  const json::object& o = page.as_object();
  for (const auto& field : o) {
    if (std::find(std::begin(kFields), std::end(kFields), field.key()) == std::end(kFields)) {
      return {OpStatus::kInvalidArgument, wire::PageShape(key)};
    }
  }
  json::object out;
  auto text = [&](std::string_view name, size_t max, bool lines) -> OpResult<Done> {
    const json::value* v = o.if_contains(name);
    if (v == nullptr || v->is_null()) return Done{};
    if (!v->is_string() || !IsText(v->as_string(), max, lines)) {
      return Refuse(wire::PageText(k + "." + std::string(name), max));
    }
    out[name] = v->as_string();
    return Done{};
  };
  if (auto r = text("title", kMaxPageTitleBytes, false); !r.ok()) return {r.status(), r.message()};
  if (auto r = text("message", kMaxPageMessageBytes, true); !r.ok()) {
    return {r.status(), r.message()};
  }
  if (const json::value* v = o.if_contains("logo_url"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !IsLogoUrl(v->as_string())) {
      return {OpStatus::kInvalidArgument, wire::PageLogoUrl(key)};
    }
    out["logo_url"] = v->as_string();
  }
  if (const json::value* v = o.if_contains("colors"); v != nullptr && !v->is_null()) {
    if (!v->is_object()) return {OpStatus::kInvalidArgument, wire::PageColors(key)};
    json::object colors;
    for (const auto& c : v->as_object()) {
      if (std::find(std::begin(kColors), std::end(kColors), c.key()) == std::end(kColors) ||
          !c.value().is_string() || !IsColor(c.value().as_string())) {
        return {OpStatus::kInvalidArgument, wire::PageColors(key)};
      }
    }
    for (std::string_view name : kColors) {
      if (const json::value* c = v->as_object().if_contains(name)) {
        colors[name] = AsciiLower(std::string_view(c->as_string()));
      }
    }
    if (!colors.empty()) out["colors"] = std::move(colors);
  }
  if (const json::value* v = o.if_contains("language"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !IsPageLanguage(v->as_string())) {
      return {OpStatus::kInvalidArgument, wire::PageLanguage(key)};
    }
    out["language"] = v->as_string();
  }
  if (const json::value* v = o.if_contains("template"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !IsTemplateName(v->as_string())) {
      return {OpStatus::kInvalidArgument, wire::PageTemplate(key)};
    }
    out["template"] = v->as_string();
  }
  std::string canonical = json::serialize(out);
  if (canonical.size() > core::kMaxPageBytes) {
    return {OpStatus::kInvalidArgument, wire::JsonLongerThan(key, core::kMaxPageBytes)};
  }
  return canonical;
}

PageSettings ParsePageText(std::string_view text) {
  PageSettings s;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return s;
  const json::object& o = v.as_object();
  auto get = [](const json::object& from, std::string_view name) -> std::optional<std::string> {
    const json::value* f = from.if_contains(name);
    if (f == nullptr || !f->is_string()) return std::nullopt;
    return std::string(f->as_string());
  };
  s.title = get(o, "title");
  s.message = get(o, "message");
  s.logo_url = get(o, "logo_url");
  s.language = get(o, "language");
  s.template_name = get(o, "template");
  if (const json::value* c = o.if_contains("colors"); c != nullptr && c->is_object()) {
    s.background = get(c->as_object(), "background");
    s.text = get(c->as_object(), "text");
    s.accent = get(c->as_object(), "accent");
  }
  return s;
}

json::value PageJson(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  return !ec && v.is_object() ? v : json::value(nullptr);
}

std::string_view PickLanguage(std::string_view header) {
  std::string_view best = kPageLanguages[0];
  double best_q = 0;
  size_t from = 0;
  while (from <= header.size()) {
    size_t comma = header.find(',', from);
    std::string_view item = header.substr(
        from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    from = comma == std::string_view::npos ? header.size() + 1 : comma + 1;
    size_t semi = item.find(';');
    std::string_view range = item.substr(0, semi);
    double q = 1;
    if (semi != std::string_view::npos) {
      std::string_view params = item.substr(semi + 1);
      size_t qat = params.find("q=");
      if (qat != std::string_view::npos) {
        std::string number(params.substr(qat + 2, 5));
        q = std::strtod(number.c_str(), nullptr);
      }
    }
    while (!range.empty() && (range.front() == ' ' || range.front() == '\t'))
      range.remove_prefix(1);
    while (!range.empty() && (range.back() == ' ' || range.back() == '\t')) range.remove_suffix(1);
    std::string primary = AsciiLower(range.substr(0, range.find('-')));
    std::string_view match;
    if (primary == "*") {
      match = kPageLanguages[0];
    } else {
      for (std::string_view lang : kPageLanguages) {
        if (primary == lang) match = lang;
      }
    }
    if (!match.empty() && q > best_q) {  // the first of equal q-values wins
      best = match;
      best_q = q;
    }
  }
  return best;
}

}  // namespace anteroom::server
