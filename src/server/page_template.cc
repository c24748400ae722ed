#include "server/page_template.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <map>
#include <optional>

#include "server/web_i18n.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

struct Replacement {
  char from;
  std::string_view to;
};

// `text` with every character that has a replacement replaced.
std::string ReplaceChars(std::string_view text, std::initializer_list<Replacement> replacements) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto it = std::find_if(replacements.begin(), replacements.end(),
                           [c](const Replacement& r) { return r.from == c; });
    if (it == replacements.end()) {
      out += c;
    } else {
      out += it->to;
    }
  }
  return out;
}

// JSON text made safe inside <script>: no "</script>" or "<!--" can form, and U+2028/U+2029
// (line terminators to older JavaScript) are escaped too.
std::string ScriptSafe(std::string_view json_text) {
  std::string out = ReplaceChars(json_text, {{'<', "\\u003c"}, {'>', "\\u003e"}, {'&', "\\u0026"}});
  for (std::string_view sep :
       {std::string_view("\xe2\x80\xa8"), std::string_view("\xe2\x80\xa9")}) {
    const std::string escaped = sep[2] == '\xa8' ? "\\u2028" : "\\u2029";
    for (size_t at = 0; (at = out.find(sep, at)) != std::string::npos; at += escaped.size()) {
      out.replace(at, sep.size(), escaped);
    }
  }
  return out;
}

// A CSS colour as the page writes it: #rrggbb, else `fallback`.
std::string_view CssColor(const std::optional<std::string>& color, std::string_view fallback) {
  if (!color || color->size() != 7 || (*color)[0] != '#' ||
      !std::all_of(color->begin() + 1, color->end(),
                   [](unsigned char c) { return std::isxdigit(c) != 0; })) {
    return fallback;
  }
  return *color;
}

// A logo URL as the page writes it: https:// or a same-origin path, else none.
std::string LogoUrl(const std::optional<std::string>& url) {
  if (!url) return "";
  std::string_view u = *url;
  if (u.starts_with("https://") || (u.starts_with("/") && !u.starts_with("//"))) {
    return std::string(u);
  }
  return "";
}

std::string StringOf(const json::object& strings, std::string_view key) {
  const json::value* v = strings.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// `text` with "{name}" replaced by `value` (plain text: escaped later, with the rest).
std::string WithVariable(std::string text, std::string_view name, std::string_view value) {
  const std::string token = "{" + std::string(name) + "}";
  for (size_t at = 0; (at = text.find(token, at)) != std::string::npos; at += value.size()) {
    text.replace(at, token.size(), value);
  }
  return text;
}

json::object SettingsJson(const PageSettings& s, std::string_view language) {
  json::object o;
  if (s.title) o["title"] = *s.title;
  if (s.message) o["message"] = *s.message;
  if (s.logo_url) o["logo_url"] = *s.logo_url;
  json::object colors;
  if (s.background) colors["background"] = *s.background;
  if (s.text) colors["text"] = *s.text;
  if (s.accent) colors["accent"] = *s.accent;
  if (!colors.empty()) o["colors"] = std::move(colors);
  o["language"] = language;
  if (s.template_name) o["template"] = *s.template_name;
  return o;
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  return ReplaceChars(
      text, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}});
}

std::string ScriptJsonString(std::string_view text) {
  return ScriptSafe(json::serialize(json::string_view(text.data(), text.size())));
}

std::string ScriptJson(const json::value& value) { return ScriptSafe(json::serialize(value)); }

const json::object& Translation(std::string_view lang) {
  static const std::map<std::string, json::object, std::less<>> kAll = [] {
    std::map<std::string, json::object, std::less<>> all;
    for (std::string_view l : kPageLanguages) {
      std::string name = std::string(l) + ".json";
      json::value v = json::parse(web_i18n::Find(name));
      all.emplace(std::string(l), v.as_object());
    }
    return all;
  }();
  auto it = kAll.find(lang);
  return it != kAll.end() ? it->second : kAll.find(kPageLanguages[0])->second;
}

std::string RenderWaitPage(std::string_view page, const PageFill& fill) {
  const json::object& strings =
      fill.strings != nullptr ? *fill.strings : Translation(fill.language);
  const PageSettings& s = fill.settings;
  const std::string logo = LogoUrl(s.logo_url);
  const bool custom_colors = s.background || s.text || s.accent;
  std::string document_title =
      s.title ? *s.title : WithVariable(StringOf(strings, "document_title"), "room", fill.room);

  // The value of a placeholder, escaped; nullopt: not a placeholder (kept as written).
  auto value = [&](std::string_view name) -> std::optional<std::string> {
    if (name == "room") return HtmlEscape(fill.room);
    if (name == "room_json") return ScriptJsonString(fill.room);
    if (name == "base") return HtmlEscape(fill.base);
    if (name == "base_json") return ScriptJsonString(fill.base);
    if (name == "lang") return HtmlEscape(fill.language);
    if (name == "document_title") return HtmlEscape(document_title);
    if (name == "title") return HtmlEscape(s.title.value_or(""));
    if (name == "title_hidden") return std::string(s.title ? "" : "hidden");
    if (name == "message") return HtmlEscape(s.message.value_or(""));
    if (name == "message_hidden") return std::string(s.message ? "" : "hidden");
    if (name == "logo_url") return HtmlEscape(logo);
    if (name == "logo_hidden") return std::string(logo.empty() ? "hidden" : "");
    if (name == "brand_hidden") return std::string(logo.empty() && !s.title ? "hidden" : "");
    if (name == "colors") return std::string(custom_colors ? "custom" : "default");
    if (name == "color_background") return std::string(CssColor(s.background, kDefaultBackground));
    if (name == "color_text") return std::string(CssColor(s.text, kDefaultText));
    if (name == "color_accent") return std::string(CssColor(s.accent, kDefaultAccent));
    // Muted text: the room's text colour when it sets one (its contrast is the admin's choice).
    if (name == "color_muted") return std::string(CssColor(s.text, kDefaultMuted));
    if (name == "state") return HtmlEscape(fill.state);
    if (name == "i18n_json") return ScriptJson(strings);
    if (name == "page_json") return ScriptJson(SettingsJson(s, fill.language));
    if (name == "preview_json") return ScriptJson(fill.preview);
    if (name.starts_with("t.")) {
      const json::value* v = strings.if_contains(name.substr(2));
      if (v != nullptr && v->is_string()) return HtmlEscape(v->as_string());
    }
    return std::nullopt;
  };

  std::string out;
  out.reserve(page.size() + 1024);
  size_t from = 0;
  for (size_t open; (open = page.find("{{", from)) != std::string_view::npos;) {
    out.append(page.substr(from, open - from));
    size_t close = page.find("}}", open + 2);
    std::optional<std::string> filled;
    if (close != std::string_view::npos && close - open <= 66) {
      std::string_view name = page.substr(open + 2, close - open - 2);
      if (name.find('{') == std::string_view::npos) filled = value(name);
    }
    if (filled) {
      out += *filled;
      from = close + 2;
    } else {
      out += '{';  // one brace only: "{{{room}}}" is "{" and then a placeholder
      from = open + 1;
    }
  }
  out.append(page.substr(from));
  return out;
}

std::string RenderPageTemplate(std::string_view page, std::string_view room,
                               std::string_view base) {
  PageFill fill;
  fill.room = std::string(room);
  fill.base = std::string(base);
  return RenderWaitPage(page, fill);
}

}  // namespace anteroom::server
