// The browser side, served from the binary: the drop-in client /anteroom.js, the default
// waiting page /wait/{room}, the demo target /demo, the admin dashboard /admin and the API
// reference /api. The files live in web/ and are embedded at build time
// (cmake/embed_files.cmake), so a single binary serves them with no build step and no files to
// deploy.
#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "common/wire_errors.h"
#include "server/families.h"
#include "server/page_settings.h"
#include "server/page_template.h"
#include "server/preamble.h"
#include "server/web_assets.h"

namespace anteroom::server {

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kJavaScript = "application/javascript; charset=utf-8";
// Pages are revalidated every time (they are small, and a template may change with a
// restart); the client script may be cached briefly.
constexpr std::string_view kPageCache = "no-cache";
constexpr std::string_view kScriptCache = "public, max-age=300";

static_assert(!web_assets::Find("anteroom.js").empty(), "web/anteroom.js is not embedded");
static_assert(!web_assets::Find("wait.html").empty(), "web/wait.html is not embedded");
static_assert(!web_assets::Find("demo.html").empty(), "web/demo.html is not embedded");
static_assert(!web_assets::Find("admin.html").empty(), "web/admin.html is not embedded");
static_assert(!web_assets::Find("api.html").empty(), "web/api.html is not embedded");

Response Asset(std::string body, std::string_view content_type, std::string_view cache) {
  Response r;
  r.body = std::move(body);
  r.content_type = std::string(content_type);
  r.headers.emplace_back("Cache-Control", std::string(cache));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

// Pages that may carry an admission token in their address keep it out of Referer headers.
Response TokenPage(std::string body) {
  Response r = Asset(std::move(body), kHtml, kPageCache);
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  return r;
}

// GET /anteroom.js: the drop-in client.
void CmdScript(Services&, const Request&, Respond respond) {
  respond(Asset(std::string(web_assets::Find("anteroom.js")), kJavaScript, kScriptCache));
}

// The template a page is filled from: the room's page.template when the server has it, else
// --templates DIR/wait.html, else the built-in page.
std::string_view TemplateFor(const WebOptions& web, const PageSettings& settings) {
  if (settings.template_name) {
    auto it = web.templates.find(*settings.template_name);
    if (it != web.templates.end()) return it->second;
  }
  return web.wait_template.empty() ? web_assets::Find("wait.html")
                                   : std::string_view(web.wait_template);
}

std::string HeaderOf(const Request& req, std::string_view name) {
  auto it = req.fields.find(name);
  return it == req.fields.end() ? std::string() : std::string(it->value());
}

// Whether the request prefers JSON to a page: it accepts application/json and not text/html
// (what a browser's navigation sends).
bool WantsJson(const Request& req) {
  std::string accept = HeaderOf(req, "Accept");
  return accept.find("application/json") != std::string::npos &&
         accept.find("text/html") == std::string::npos;
}

// The settings a page shows: the room's own, with the open event's page laid over them.
void PageSettingsOf(Services& s, const std::string& room, std::function<void(PageSettings)> then) {
  s.backend.GetRoom(room, [&s, room, then = std::move(then)](OpResult<core::RoomInfo> info) {
    if (!info.ok()) return then(PageSettings{});  // the page shows the API's answer
    PageSettings own = info->config.page ? ParsePageText(*info->config.page) : PageSettings{};
    if (!info->event) return then(own);
    s.backend.ListEvents(
        room, [own, event = *info->event, then](OpResult<std::vector<core::RoomEvent>> events) {
          if (!events.ok()) return then(own);
          for (const core::RoomEvent& e : *events) {
            if (e.id == event && e.spec.overrides.page) {
              return then(own.Over(ParsePageText(*e.spec.overrides.page)));
            }
          }
          then(own);
        });
  });
}

// GET /wait/{room}: the waiting page, in the room's language or the one Accept-Language
// prefers. Any valid name gets it, even of a room that does not exist (yet): the page asks
// the API and shows its answer.
void CmdWaitPage(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  if (WantsJson(req)) {
    // JSON mode: an app or a single-page app waits without HTML. The session is the one named
    // (Anteroom-Session, or ?session=), else a new one; the answer is the check's.
    OpResult<std::string> session = SessionFromRequest(req);
    if (!session.ok()) return respond(ErrorReply(session));
    return CheckSession(s, req, req.params[0], std::move(*session), nullptr, nullptr, std::nullopt,
                        [respond = std::move(respond)](Response r) {
                          r.headers.emplace_back("Cache-Control", "no-store");
                          r.headers.emplace_back("Vary", "Accept");
                          respond(std::move(r));
                        });
  }
  PageSettingsOf(
      s, req.params[0],
      [&s, room = req.params[0], accept = HeaderOf(req, "Accept-Language"),
       respond = std::move(respond)](PageSettings settings) {
        PageFill fill;
        fill.room = room;
        fill.base = s.web.Get()->public_url;
        fill.language = settings.language ? *settings.language : std::string(PickLanguage(accept));
        fill.settings = std::move(settings);
        Response r = TokenPage(RenderWaitPage(TemplateFor(*s.web.Get(), fill.settings), fill));
        // The language depends on the header unless the room fixes it; JSON mode on
        // Accept.
        r.headers.emplace_back("Vary", "Accept, Accept-Language");
        r.headers.emplace_back("Content-Language", fill.language);
        respond(std::move(r));
      });
}

// The sample status each state of a preview shows (the fields of a check; times relative).
const json::value* PreviewStatus(std::string_view state) {
  static const json::object kStates = json::parse(R"({
    "prequeue": {"status": {"status": "prequeue", "position": null, "waiting": 0, "active": 0,
                            "capacity": 100, "eta_ms": null, "phase": "prequeue",
                            "queueing_method": "fifo", "starts_in_ms": 754000}},
    "waiting": {"status": {"status": "waiting", "position": 42, "waiting": 318, "active": 100,
                           "capacity": 100, "eta_ms": 540000, "phase": "queue",
                           "queueing_method": "fifo"}},
    "random": {"status": {"status": "waiting", "position": null, "waiting": 250, "active": 100,
                          "capacity": 100, "eta_ms": null, "phase": "queue",
                          "queueing_method": "random",
                          "odds": {"chance_next": 0.004, "p25_ms": 120000, "p50_ms": 300000,
                                   "p75_ms": 600000}}},
    "active": {"status": {"status": "active", "position": null, "waiting": 12, "active": 100,
                          "capacity": 100, "eta_ms": null, "phase": "queue",
                          "queueing_method": "fifo", "token": "PREVIEW.TOKEN.NOT-VALID"}},
    "closed": {"status": {"status": "closed", "position": null, "waiting": 0, "active": 40,
                          "capacity": 100, "eta_ms": null, "phase": "closed",
                          "queueing_method": "reject"}},
    "error": {"error": {"code": "unavailable", "message": ""}}
  })")
                                          .as_object();
  return kStates.if_contains(state);
}

// GET /v1/rooms/{room}/page/preview?state=S&lang=L&template=T (admin): the page as the room
// would show it in one state, with a sample status and no connection; the room need not exist.
void CmdPagePreview(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  const std::string* state = req.Query("state");
  std::string state_name = state ? *state : "waiting";
  const json::value* status = PreviewStatus(state_name);
  if (status == nullptr) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, std::string(wire::kPreviewState)));
  }
  const std::string* lang = req.Query("lang");
  if (lang != nullptr && !IsPageLanguage(*lang)) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, std::string(wire::kPreviewLanguage)));
  }
  const std::string* name = req.Query("template");
  if (name != nullptr && !s.web.Get()->templates.contains(*name)) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, std::string(wire::kPreviewTemplate)));
  }
  PageSettingsOf(
      s, req.params[0],
      [&s, room = req.params[0], accept = HeaderOf(req, "Accept-Language"),
       lang = lang ? *lang : std::string(), name = name ? *name : std::string(), state_name,
       status = *status, respond = std::move(respond)](PageSettings settings) {
        if (!name.empty()) settings.template_name = name;
        PageFill fill;
        fill.room = room;
        fill.base = s.web.Get()->public_url;
        fill.language = !lang.empty()       ? lang
                        : settings.language ? *settings.language
                                            : std::string(PickLanguage(accept));
        fill.settings = std::move(settings);
        fill.state = state_name;
        fill.preview = status;
        Response r = Asset(RenderWaitPage(TemplateFor(*s.web.Get(), fill.settings), fill), kHtml,
                           kPageCache);
        r.headers.emplace_back("Content-Language", fill.language);
        r.headers.emplace_back("X-Frame-Options", "DENY");
        respond(std::move(r));
      });
}

// GET /demo: the demo target page.
void CmdDemoPage(Services&, const Request&, Respond respond) {
  respond(TokenPage(std::string(web_assets::Find("demo.html"))));
}

// GET /admin: the dashboard.
void CmdAdminPage(Services&, const Request&, Respond respond) {
  Response r = Asset(std::string(web_assets::Find("admin.html")), kHtml, kPageCache);
  // Its buttons change rooms and queues: no other site may frame it (clickjacking).
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Content-Security-Policy", "frame-ancestors 'none'");
  respond(std::move(r));
}

// GET /api: the OpenAPI document rendered in the page itself, from /openapi.json: no CDN, no
// request to any other origin (its policy allows none).
void CmdApiPage(Services&, const Request&, Respond respond) {
  Response r = Asset(std::string(web_assets::Find("api.html")), kHtml, kPageCache);
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'unsafe-inline'; "
                         "style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'");
  respond(std::move(r));
}

}  // namespace

WebOptions LoadWebOptions(const std::string& templates_dir) {
  WebOptions options;
  if (templates_dir.empty()) return options;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("--templates " + templates_dir + ": " + why);
  };
  std::error_code ec;
  fs::file_status status = fs::status(templates_dir, ec);
  if (!fs::exists(status)) fail("no such directory");
  if (!fs::is_directory(status)) fail("not a directory");
  fs::directory_iterator probe(templates_dir, ec);
  if (ec) fail("cannot read the directory: " + ec.message());

  for (const fs::directory_entry& entry : fs::directory_iterator(templates_dir, ec)) {
    const fs::path& path = entry.path();
    std::string stem = path.stem().string();
    if (path.extension() != ".html" || stem == "wait" || stem.empty() || stem.size() > 64 ||
        !std::all_of(
            stem.begin(), stem.end(),
            [](unsigned char c) { return std::isalnum(c) != 0 || c == '_' || c == '-'; }) ||
        !entry.is_regular_file(ec)) {
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read " + path.filename().string() + ": " + std::strerror(errno));
    std::ostringstream content;
    content << in.rdbuf();
    if (in.bad() || content.str().empty()) fail(path.filename().string() + " is empty");
    options.templates.emplace(stem, std::move(content).str());
    spdlog::info("page template {}: {}", stem, path.string());
  }

  fs::path wait = fs::path(templates_dir) / "wait.html";
  fs::file_status wait_status = fs::status(wait, ec);
  if (!fs::exists(wait_status)) {
    spdlog::info("--templates {}: no wait.html there, serving the built-in waiting page",
                 templates_dir);
    return options;
  }
  if (!fs::is_regular_file(wait_status)) fail("wait.html is not a regular file");
  std::ifstream in(wait, std::ios::binary);
  if (!in) fail("cannot read wait.html: " + std::string(std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) fail("cannot read wait.html");
  options.wait_template = std::move(content).str();
  if (options.wait_template.empty()) fail("wait.html is empty");
  options.templates.emplace("wait", options.wait_template);
  spdlog::info("waiting page template: {} ({} bytes)", wait.string(), options.wait_template.size());
  return options;
}

void RegisterWebRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/anteroom.js", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdScript},
      {verb::get, "/wait/{room}", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdWaitPage},
      {verb::get, "/v1/rooms/{room}/page/preview", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdPagePreview},
      {verb::get, "/demo", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdDemoPage},
      {verb::get, "/admin", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdAdminPage},
      {verb::get, "/api", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdApiPage},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
