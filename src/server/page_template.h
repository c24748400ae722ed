#pragma once
// The waiting page template's placeholders (docs/api.md, "The waiting page"), each filled with
// its value escaped for the context it is documented for:
//
//   HTML text and quoted attributes (HtmlEscape): {{room}}, {{base}}, {{lang}}, {{title}},
//     {{message}}, {{document_title}}, {{logo_url}}, {{state}}, {{t.KEY}} (a translation),
//     {{title_hidden}}, {{message_hidden}}, {{logo_hidden}}, {{brand_hidden}} (neither title nor
//     logo) ("hidden" or ""), {{colors}}
//     ("custom" or "default")
//   CSS values: {{color_background}}, {{color_text}}, {{color_accent}}, {{color_muted}}: only
//     ever #rrggbb (a value that is not is replaced by the default)
//   JSON inside <script> (ScriptJson*): {{room_json}}, {{base_json}}, {{i18n_json}} (the
//     translation object), {{page_json}} (the page settings in force), {{preview_json}} (null,
//     or the state a preview shows)
//
// Room names are already limited to [A-Za-z0-9._:-] and the settings validated, but a template is
// filled as if every value could hold anything. Any other "{{" is kept as written.

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

#include "server/page_settings.h"

namespace anteroom::server {

// Text safe in HTML content and quoted attributes.
std::string HtmlEscape(std::string_view text);

// A JSON string literal that is also safe inside <script>: '<', '>' and '&' are written as
// \u003c, \u003e and \u0026, so no "</script>" or "<!--" can form.
std::string ScriptJsonString(std::string_view text);
// Any JSON value, made safe inside <script> the same way.
std::string ScriptJson(const boost::json::value& value);

// The colours of the default theme (WCAG AA: text and muted text on the background >= 4.5:1).
inline constexpr std::string_view kDefaultBackground = "#ffffff";
inline constexpr std::string_view kDefaultText = "#1f2937";
inline constexpr std::string_view kDefaultAccent = "#1d4ed8";
inline constexpr std::string_view kDefaultMuted = "#4b5563";

// The bundled translation of `lang` (web/i18n/LANG.json), English for any other.
const boost::json::object& Translation(std::string_view lang);

// What a page is filled with.
struct PageFill {
  std::string room;
  std::string base;  // where browsers reach anteroom (--public-url), "" for the root
  std::string language = "en";
  PageSettings settings;                         // in force: the room's, an event's over it
  const boost::json::object* strings = nullptr;  // the translation; nullptr: Translation()
  std::string state;                             // a preview's state; "" when live
  boost::json::value preview = nullptr;          // a preview's status object
};

// `page` with every placeholder replaced, in one pass (nothing substituted is scanned again).
std::string RenderWaitPage(std::string_view page, const PageFill& fill);

// RenderWaitPage with only the room and base known (English, the default settings).
std::string RenderPageTemplate(std::string_view page, std::string_view room,
                               std::string_view base = {});

}  // namespace anteroom::server
