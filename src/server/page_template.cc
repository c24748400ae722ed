#include "server/page_template.h"

#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>

#include <algorithm>
#include <initializer_list>

namespace anteroom::server {

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

}  // namespace

std::string HtmlEscape(std::string_view text) {
  return ReplaceChars(
      text, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}});
}

std::string ScriptJsonString(std::string_view text) {
  std::string json = boost::json::serialize(boost::json::string_view(text.data(), text.size()));
  return ReplaceChars(json, {{'<', "\\u003c"}, {'>', "\\u003e"}, {'&', "\\u0026"}});
}

std::string RenderPageTemplate(std::string_view page, std::string_view room,
                               std::string_view base) {
  constexpr std::string_view kRoom = "{{room}}";
  constexpr std::string_view kRoomJson = "{{room_json}}";
  constexpr std::string_view kBase = "{{base}}";
  constexpr std::string_view kBaseJson = "{{base_json}}";
  std::string html = HtmlEscape(room);
  std::string json = ScriptJsonString(room);
  std::string base_html = HtmlEscape(base);
  std::string base_json = ScriptJsonString(base);
  std::string out;
  out.reserve(page.size() + 4 * room.size());
  size_t from = 0;
  for (size_t open; (open = page.find("{{", from)) != std::string_view::npos;) {
    out.append(page.substr(from, open - from));
    std::string_view rest = page.substr(open);
    if (rest.starts_with(kRoom)) {
      out += html;
      from = open + kRoom.size();
    } else if (rest.starts_with(kRoomJson)) {
      out += json;
      from = open + kRoomJson.size();
    } else if (rest.starts_with(kBase)) {
      out += base_html;
      from = open + kBase.size();
    } else if (rest.starts_with(kBaseJson)) {
      out += base_json;
      from = open + kBaseJson.size();
    } else {
      out += '{';  // one brace only: "{{{room}}}" is "{" and then a placeholder
      from = open + 1;
    }
  }
  out.append(page.substr(from));
  return out;
}

}  // namespace anteroom::server
