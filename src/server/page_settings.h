#pragma once
// A room's waiting-page settings (docs/api.md, "The waiting page"): what the page people wait
// on says and looks like. Set with the room (PUT /v1/rooms/{room} {"page": {...}}) or for a
// scheduled event ({"overrides": {"page": {...}}}), kept by the backends as one opaque JSON text
// (core::RoomConfig::page, core::EventOverrides::page), read back here:
//
//   "page": {
//     "title": "Winter drop",              the heading (at most 200 bytes)
//     "message": "Thanks for waiting.",    a paragraph under it (at most 2000 bytes)
//     "logo_url": "https://cdn.example/l.svg",  https with a host, or a path on this server
//     "colors": {"background": "#ffffff", "text": "#1f2937", "accent": "#2f6fde"},  #rrggbb
//     "language": "de",                    en, de, fr, es, ja: fixes the page's language
//                                          (otherwise Accept-Language picks it)
//     "template": "shop"                   --templates DIR/shop.html instead of the built-in page
//   }
//
// Every field is optional; text is UTF-8 without control characters (a newline is allowed in
// the message). The values are the admin's, but the page treats them as if they could hold
// anything: each is escaped for the context it lands in (page_template.h).

#include <boost/json/value.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/op_status.h"

namespace anteroom::server {

inline constexpr size_t kMaxPageTitleBytes = 200;
inline constexpr size_t kMaxPageMessageBytes = 2000;
// The page's languages: the bundled translations (web/i18n/LANG.json), the first the default.
inline constexpr std::array<std::string_view, 5> kPageLanguages = {"en", "de", "fr", "es", "ja"};

struct PageSettings {
  std::optional<std::string> title, message, logo_url;
  std::optional<std::string> background, text, accent;  // "#rrggbb"
  std::optional<std::string> language;                  // one of kPageLanguages
  std::optional<std::string> template_name;

  // `over`'s fields where it has them (an event's page over the room's), this one's elsewhere.
  PageSettings Over(const PageSettings& over) const;
};

// The settings as PUT sends them under `key` ("page", "overrides.page"): the canonical text to
// store (members in a fixed order, colours lowercase), or invalid_argument naming what is wrong.
OpResult<std::string> CanonicalPageText(const boost::json::value& page, std::string_view key);
// The stored text read back (the defaults for text that does not read: never stored by this
// code).
PageSettings ParsePageText(std::string_view text);
// The stored text as a JSON value for answers (null when it does not read).
boost::json::value PageJson(std::string_view text);

// Whether `lang` is a bundled language.
bool IsPageLanguage(std::string_view lang);
// The bundled language an Accept-Language header prefers most (RFC 9110 12.5.4: q-values,
// "de-CH" matching "de", "*" the default), the default (en) when it names none of them.
std::string_view PickLanguage(std::string_view accept_language);

}  // namespace anteroom::server
