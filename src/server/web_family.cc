// The browser side, served from the binary: the drop-in client /anteroom.js, the default
// waiting page /wait/{room}, the demo target /demo, the admin dashboard /admin and the API
// reference /api. The files live in web/ and are embedded at build time
// (cmake/embed_files.cmake), so a single binary serves them with no build step and no files to
// deploy.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/wire_errors.h"
#include "server/families.h"
#include "server/page_template.h"
#include "server/preamble.h"
#include "server/web_assets.h"

namespace anteroom::server {

namespace {

namespace fs = std::filesystem;

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

// GET /wait/{room}: the waiting page. Any valid name gets it, even of a room that does not
// exist (yet): the page asks the API and shows its answer.
void CmdWaitPage(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  std::string_view page = s.web.wait_template.empty() ? web_assets::Find("wait.html")
                                                      : std::string_view(s.web.wait_template);
  respond(TokenPage(RenderPageTemplate(page, req.params[0], s.web.public_url)));
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
  spdlog::info("waiting page template: {} ({} bytes)", wait.string(), options.wait_template.size());
  return options;
}

void RegisterWebRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/anteroom.js", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdScript},
      {verb::get, "/wait/{room}", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdWaitPage},
      {verb::get, "/demo", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdDemoPage},
      {verb::get, "/admin", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdAdminPage},
      {verb::get, "/api", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdApiPage},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
