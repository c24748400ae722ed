// The waiting page as the server fills it: translations picked by Accept-Language or fixed by
// the room, the room's page settings (an open event's laid over them), named templates, the
// admin's preview of each state, and every inserted value escaped for where it lands.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire_errors.h"
#include "family_world.h"
#include "server/page_settings.h"
#include "server/page_template.h"
#include "server/web_assets.h"

namespace anteroom::server {
namespace {

namespace json = boost::json;
using http::verb;
using testing::ErrorMessage;
using testing::FamilyWorld;

Request PageRequest(std::string target, std::string accept_language = {}) {
  Request r;
  r.method = verb::get;
  r.target = std::move(target);
  if (!accept_language.empty()) r.fields.set("Accept-Language", accept_language);
  return r;
}

std::string HeaderValue(const Response& r, std::string_view name) {
  for (const auto& [key, value] : r.headers) {
    if (key == name) return value;
  }
  return "";
}

size_t Count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// The {variables} of a translation's string.
std::set<std::string> Variables(std::string_view text) {
  std::set<std::string> out;
  std::regex variable("\\{(\\w+)\\}");
  std::string s(text);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), variable); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

TEST(WebFamilyTest, EveryLanguageTranslatesEveryStringWithTheSameVariables) {
  const json::object& en = Translation("en");
  EXPECT_GE(en.size(), 50u);
  for (std::string_view lang : kPageLanguages) {
    const json::object& t = Translation(lang);
    EXPECT_EQ(t.size(), en.size()) << lang;
    for (const auto& [key, value] : en) {
      const json::value* other = t.if_contains(key);
      ASSERT_NE(other, nullptr) << lang << " lacks " << key;
      ASSERT_TRUE(other->is_string()) << lang << " " << key;
      EXPECT_FALSE(other->as_string().empty()) << lang << " " << key;
      EXPECT_EQ(Variables(other->as_string()), Variables(value.as_string())) << lang << " " << key;
      if (lang != "en" && key != "logo_alt" && !key.starts_with("duration_") &&
          key != "countdown_days") {
        EXPECT_NE(other->as_string(), value.as_string()) << lang << " leaves " << key << " English";
      }
    }
  }
}

// Every string of the page is in the translations, none in the HTML: no English sentence of
// en.json stands in the template.
TEST(WebFamilyTest, TheBuiltInPageHoldsNoStringOfItsOwn) {
  std::string_view page = web_assets::Find("wait.html");
  for (const auto& [key, value] : Translation("en")) {
    std::string text(value.as_string());
    std::string plain = text.substr(0, text.find('{'));
    if (plain.size() < 6) continue;  // "Logo", "now": words code may hold
    EXPECT_EQ(page.find(plain), std::string_view::npos) << key << ": " << plain;
  }
}

TEST(WebFamilyTest, AcceptLanguagePicksTheTranslationUnlessTheRoomFixesOne) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  auto german = w.SendRequest(PageRequest("/wait/r", "de-CH, de;q=0.9, en;q=0.5"));
  ASSERT_TRUE(german);
  EXPECT_EQ(german->status, 200u);
  EXPECT_NE(german->body.find("<html lang=\"de\""), std::string::npos);
  EXPECT_NE(german->body.find("Ihre Position"), std::string::npos);
  EXPECT_EQ(HeaderValue(*german, "Content-Language"), "de");
  EXPECT_EQ(HeaderValue(*german, "Vary"), "Accept, Accept-Language");
  auto fallback = w.SendRequest(PageRequest("/wait/r", "pt-BR"));
  EXPECT_NE(fallback->body.find("Your position"), std::string::npos);
  auto unknown = w.SendRequest(PageRequest("/wait/nobody", "ja"));
  EXPECT_NE(unknown->body.find("あなたの順番"), std::string::npos) << "a room not made yet";

  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"page": {"language": "fr"}})").status, 200u);
  auto fixed = w.SendRequest(PageRequest("/wait/r", "de"));
  EXPECT_NE(fixed->body.find("Votre position"), std::string::npos);
  EXPECT_EQ(HeaderValue(*fixed, "Content-Language"), "fr");
}

TEST(WebFamilyTest, TheRoomsPageSettingsAndAnOpenEventsOverThem) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1, "page": {"title": "Shop",
      "message": "Hello", "logo_url": "https://cdn.example/logo.svg",
      "colors": {"background": "#FAFAFA", "accent": "#aa0000"}}})")
                .status,
            200u);
  std::string page = w.Call(verb::get, "/wait/r").body;
  EXPECT_NE(page.find("<title>Shop</title>"), std::string::npos);
  EXPECT_NE(page.find("id=\"brand-title\" >Shop</p>"), std::string::npos) << page.substr(0, 4000);
  EXPECT_NE(page.find("src=\"https://cdn.example/logo.svg\""), std::string::npos);
  EXPECT_NE(page.find("--bg: #fafafa; --fg: #1f2937; --accent: #aa0000;"), std::string::npos);
  EXPECT_NE(page.find("data-colors=\"custom\""), std::string::npos);

  // An event open now: its page's fields over the room's.
  const int64_t now = w.clock().NowMs();
  Response event = w.Admin(verb::put, "/v1/rooms/r/schedule/drop",
                           R"({"starts_at": )" + std::to_string(now - 1000) + R"(, "ends_at": )" +
                               std::to_string(now + 3'600'000) +
                               R"(, "overrides": {"page": {"title": "Winter drop",
                                   "colors": {"accent": "#005500"}}}})");
  ASSERT_EQ(event.status, 200u) << event.body;
  page = w.Call(verb::get, "/wait/r").body;
  EXPECT_NE(page.find("<title>Winter drop</title>"), std::string::npos);
  EXPECT_NE(page.find("--bg: #fafafa; --fg: #1f2937; --accent: #005500;"), std::string::npos);
  EXPECT_NE(page.find(">Hello</p>"), std::string::npos) << "the room's message stays";
}

TEST(WebFamilyTest, ARoomSelectsANamedTemplateAndAnUnknownOneFallsBack) {
  FamilyWorld w;
  {
    server::WebOptions web = *w.services().web.Get();
    web.templates["shop"] = "<p>{{title}}|{{t.heading_line}}|{{lang}}|{{state}}</p>";
    w.services().web.Set(std::move(web));
  }
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r",
                    R"({"capacity": 1, "page": {"template": "shop", "title": "T"}})")
                .status,
            200u);
  EXPECT_EQ(w.Call(verb::get, "/wait/r").body, "<p>T|You&#39;re in line|en|</p>");
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"page": {"template": "other"}})").status, 200u);
  EXPECT_NE(w.Call(verb::get, "/wait/r").body.find("<!doctype html>"), std::string::npos);
}

TEST(WebFamilyTest, ThePreviewRendersEachStateForTheAdminOnly) {
  FamilyWorld w;
  {
    server::WebOptions web = *w.services().web.Get();
    web.templates["shop"] = "<p>{{state}}|{{lang}}</p><script>{{preview_json}}</script>";
    w.services().web.Set(std::move(web));
  }
  EXPECT_EQ(w.Call(verb::get, "/v1/rooms/r/page/preview").status, 401u);
  for (std::string state : {"prequeue", "waiting", "random", "active", "closed", "error"}) {
    Response r = w.Admin(verb::get, "/v1/rooms/r/page/preview?state=" + state + "&lang=de");
    ASSERT_EQ(r.status, 200u) << state << r.body;
    EXPECT_NE(r.body.find("data-preview=\"" + state + "\""), std::string::npos) << state;
    EXPECT_NE(r.body.find("<html lang=\"de\""), std::string::npos) << state;
    EXPECT_EQ(HeaderValue(r, "X-Frame-Options"), "DENY");
    Response shop =
        w.Admin(verb::get, "/v1/rooms/r/page/preview?template=shop&lang=ja&state=" + state);
    EXPECT_EQ(shop.body.substr(0, shop.body.find("</p>")), "<p>" + state + "|ja") << state;
  }
  EXPECT_EQ(ErrorMessage(w.Admin(verb::get, "/v1/rooms/r/page/preview?state=gone")),
            wire::kPreviewState);
  EXPECT_EQ(ErrorMessage(w.Admin(verb::get, "/v1/rooms/r/page/preview?lang=it")),
            wire::kPreviewLanguage);
  EXPECT_EQ(ErrorMessage(w.Admin(verb::get, "/v1/rooms/r/page/preview?template=nope")),
            wire::kPreviewTemplate);
  EXPECT_EQ(w.Call(verb::get, "/v1/rooms/r").status, 404u) << "a preview makes no room";
}

// JSON mode: an app waits on the same route without HTML, answered as the check answers.
TEST(WebFamilyTest, TheWaitingRouteAnswersJsonAsTheCheckDoes) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  auto ask = [&](std::string target, std::string accept, std::string session = {}) {
    Request r = PageRequest(std::move(target));
    r.fields.set("Accept", accept);
    if (!session.empty()) r.fields.set("Anteroom-Session", session);
    return *w.SendRequest(std::move(r));
  };
  const std::string first = "first-UXVpY2tCcm93bkZveA";
  const std::string second = "second-UXVpY2tCcm93bkZveA";
  Response in = ask("/wait/r", "application/json", first);
  ASSERT_EQ(in.status, 200u) << in.body;
  EXPECT_EQ(in.content_type.substr(0, 16), "application/json");
  EXPECT_EQ(HeaderValue(in, "Cache-Control"), "no-store");
  json::value status = testing::Json(in);
  EXPECT_EQ(status.at("status").as_string(), "active");
  EXPECT_EQ(status.at("session").as_string(), first);
  EXPECT_TRUE(status.at("token").is_string());
  Response waiting = ask("/wait/r?session=" + second, "application/json");
  json::value line = testing::Json(waiting);
  EXPECT_EQ(line.at("status").as_string(), "waiting");
  EXPECT_EQ(line.at("position").as_int64(), 1);
  // The same fields as the check's answer.
  Response check = w.Call(verb::post, "/v1/rooms/r/check", R"({"session": ")" + second + R"("})");
  std::set<std::string> page_fields, check_fields;
  for (const auto& f : line.as_object()) page_fields.insert(std::string(f.key()));
  const json::value checked = testing::Json(check);
  for (const auto& f : checked.as_object()) check_fields.insert(std::string(f.key()));
  EXPECT_EQ(page_fields, check_fields);
  Response fresh = ask("/wait/r", "application/json");
  EXPECT_TRUE(testing::Json(fresh).at("session").is_string()) << "the server names one";

  EXPECT_EQ(testing::ErrorCode(ask("/wait/nobody", "application/json", first)), "unknown_room");
  EXPECT_EQ(ask("/wait/r?session=short", "application/json").status, 400u);
  // A browser's navigation accepts HTML: the page.
  Response page = ask("/wait/r", "text/html,application/xhtml+xml,application/json;q=0.9");
  EXPECT_EQ(page.content_type.substr(0, 9), "text/html");
}

// Script injection through every field of the page settings and every string of a translation:
// whatever they hold, the page has exactly the template's own elements.
TEST(WebFamilyTest, EveryInsertedValueIsEscapedForItsContext) {
  const std::string attack =
      R"(</script><script>alert(1)</script><img src=x onerror=alert(2)>"'`</style>{{room}}&)"
      "\u2028";
  json::object hostile;
  for (const auto& [key, value] : Translation("en")) hostile[key] = attack + std::string(key);
  PageFill fill;
  fill.room = "r";
  fill.language = "en\"><script>alert(3)</script>";
  fill.strings = &hostile;
  fill.settings.title = attack;
  fill.settings.message = attack;
  fill.settings.logo_url = "https://cdn.example/\"><script>alert(4)</script>";
  fill.settings.background = "#fff;}</style><script>alert(5)</script>";
  fill.settings.text = "red";
  fill.settings.accent = "#00ff00";
  fill.state = attack;
  fill.preview = json::object{{"status", json::object{{"status", attack}}}};

  std::string_view page = web_assets::Find("wait.html");
  std::string out = RenderWaitPage(page, fill);
  EXPECT_EQ(Count(out, "<script"), Count(page, "<script")) << out;
  EXPECT_EQ(Count(out, "</script"), Count(page, "</script"));
  EXPECT_EQ(Count(out, "</style"), Count(page, "</style"));
  EXPECT_EQ(Count(out, "<img"), Count(page, "<img"));
  EXPECT_EQ(out.find("<script>alert"), std::string::npos);
  EXPECT_EQ(out.find("<img src=x"), std::string::npos);
  EXPECT_NE(out.find("{{room}}&amp;"), std::string::npos) << "nothing substituted is scanned again";
  EXPECT_NE(out.find("--bg: #ffffff; --fg: #1f2937; --accent: #00ff00;"), std::string::npos)
      << "a colour that is not #rrggbb is never written into CSS";
  // The same for a template that puts each placeholder in each context.
  const std::string every =
      "<p title=\"{{title}}\">{{title}}{{message}}{{t.heading_line}}{{document_title}}</p>"
      "<img src=\"{{logo_url}}\" alt=\"{{t.logo_alt}}\"><html lang=\"{{lang}}\" "
      "data-preview=\"{{state}}\"><style>:root{--a:{{color_background}};--b:{{color_text}}}"
      "</style><script>const a={{i18n_json}},b={{page_json}},c={{preview_json}},"
      "d={{room_json}};</script>";
  out = RenderWaitPage(every, fill);
  EXPECT_EQ(Count(out, "<script"), 1u) << out;
  EXPECT_EQ(Count(out, "</script"), 1u) << out;
  EXPECT_EQ(Count(out, "</style"), 1u) << out;
  EXPECT_EQ(Count(out, "<img"), 1u) << out;
  std::string markup = out.substr(0, out.find("<style>"));
  std::string written = every.substr(0, every.find("<style>"));
  EXPECT_EQ(Count(markup, "\""), Count(written, "\"")) << "no attribute closed early: " << out;
  EXPECT_EQ(Count(markup, "'"), 0u);
  EXPECT_EQ(out.substr(out.find("<script>")).find("\u2028"), std::string::npos)
      << "U+2028 in script JSON is escaped";
  size_t script = out.find("<script>");
  json::value parsed = json::parse(out.substr(script + 16, out.find(",b=") - script - 16));
  EXPECT_EQ(parsed.at("heading_line").as_string(), attack + "heading_line") << "intact as data";
}

}  // namespace
}  // namespace anteroom::server
