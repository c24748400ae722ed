#pragma once
// The waiting page template's placeholders: {{room}}, {{room_json}}, {{base}} and {{base_json}}.
// Room names are already limited to [A-Za-z0-9._:-], but a template is filled as if they could hold
// anything.

#include <string>
#include <string_view>

namespace anteroom::server {

// Text safe in HTML content and quoted attributes.
std::string HtmlEscape(std::string_view text);

// A JSON string literal that is also safe inside <script>: '<', '>' and '&' are written as
// \u003c, \u003e and \u0026, so no "</script>" or "<!--" can form.
std::string ScriptJsonString(std::string_view text);

// `page` with {{room}} replaced by HtmlEscape(room) and {{room_json}} by ScriptJsonString(room),
// and {{base}} / {{base_json}} likewise by `base` (where browsers reach anteroom: --public-url,
// "" for the root), in one pass (nothing substituted is scanned again); any other "{{" is kept
// as written.
std::string RenderPageTemplate(std::string_view page, std::string_view room,
                               std::string_view base = {});

}  // namespace anteroom::server
