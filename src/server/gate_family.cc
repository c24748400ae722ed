// The gate: anteroom as the forward-auth hook of a proxy (nginx auth_request, Caddy
// forward_auth, Traefik ForwardAuth, Envoy ext_authz over HTTP) in front of a site that knows
// nothing of it (docs/gate.md). The proxy asks /v1/gate/{room} before each request of the site,
// passing the page's own headers and naming the request in X-Forwarded-Proto/Host/Uri (or
// X-Original-URI); the gate answers:
//
//   200                 pass: an admission cookie whose token verifies and whose admission is
//                       held (X-Anteroom-Session / X-Anteroom-Room for the site; a fresh cookie
//                       in Set-Cookie once the token is past half its life), a bypass rule, or a
//                       visitor let in on the spot (a free slot and nobody waiting)
//   302 / 401           wait: Location {public_url}/wait/{room}?return={the URL asked for}; 401
//                       when the gate URL says ?proxy=nginx (auth_request passes 2xx/401/403)
//   429 (JSON)          wait, to a client that accepts application/json: the line and where
//                       to wait live
//
// The waiting page, once admitted, posts its token to /v1/gate/{room}/enter, which sets the
// cookie (HttpOnly) and names the page to go back to; a POST to /v1/gate/{room}/leave (from the
// page a GET of it shows) clears it and frees the slot at once. docs/security.md, "The gate is a
// boundary", lists what each of these refuses and why.
#include <boost/json.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <boost/url/url.hpp>

#include <fmt/format.h>

#include <algorithm>

#include "common/ascii.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "core/room_pass.h"
#include "core/token.h"
#include "http/json_body.h"
#include "server/arrival.h"
#include "server/families.h"
#include "server/gate_cache.h"
#include "server/preamble.h"
#include "server/return_url.h"
#include "server/token_session.h"

namespace anteroom::server {

namespace json = boost::json;
namespace urls = boost::urls;

namespace {

// The query parameter of a link that carries a pass (TakePass), on the site and on /wait.
constexpr std::string_view kPassParam = "pass";

std::string_view Field(const Request& req, std::string_view name) {
  auto it = req.fields.find(name);
  return it == req.fields.end() ? std::string_view() : std::string_view(it->value());
}

// The last value of a header a proxy may have appended to ("a, b": the proxy's own is b).
std::string_view LastListed(std::string_view value) {
  value = value.substr(value.rfind(',') + 1);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  return value;
}

// Whether the page was asked for over https: the trusted proxy's X-Forwarded-Proto (TLS may
// end in front of it), or an https --public-url. It decides the cookie's Secure and __Host-
// name and whether `return` may be http, so it is believed from a --trusted-proxy only.
bool OverHttps(const Services& s, const Request& req) {
  if (s.web.Get()->public_url.starts_with("https:")) return true;
  return s.trusted_proxies.Contains(req.peer) &&
         LastListed(Field(req, "X-Forwarded-Proto")) == "https";
}

// The host the page was served on: the trusted proxy's X-Forwarded-Host, else Host.
std::string HereHost(const Services& s, const Request& req) {
  std::string_view forwarded = LastListed(Field(req, "X-Forwarded-Host"));
  if (!forwarded.empty() && s.trusted_proxies.Contains(req.peer)) return std::string(forwarded);
  return req.host;
}

// The request the proxy asks about.
struct Original {
  bool https = false;
  std::string host;    // as the page asked for it (host[:port])
  std::string uri;     // path and query, as sent, less a pass (below)
  std::string method;  // the proxy's X-Forwarded-Method, else the gate request's own
  std::string pass;    // the code of a `?pass=` the page came with (core/room_pass.h), if any
  std::string_view path() const { return std::string_view(uri).substr(0, uri.find('?')); }
  std::string Url() const { return (https ? "https://" : "http://") + host + uri; }
};

// A link that carries a pass (`https://shop.example/drop?pass=CODE`) hands the code to the
// waiting page, which redeems it with its check: the gate itself holds no session to redeem it
// for. The code leaves the URL the visitor is sent back to, so the site, its logs and the
// pages it links to never see it; a code longer than any pass is dropped. The query is
// rewritten only when it names a pass (anything else keeps its bytes as sent).
void TakePass(Original& o) {
  size_t q = o.uri.find('?');
  if (q == std::string::npos || o.uri.find("pass=", q) == std::string::npos) return;
  auto parsed = urls::parse_origin_form(o.uri);
  if (!parsed) return;
  urls::url u(*parsed);
  auto params = u.params();
  bool found = false;
  for (auto it = params.begin(); it != params.end();) {
    if ((*it).key != kPassParam) {
      ++it;
      continue;
    }
    found = true;
    if ((*it).has_value) o.pass = (*it).value;
    it = params.erase(it);
  }
  if (!found) return;
  if (o.pass.size() > core::kMaxPassCodeBytes) o.pass.clear();
  if (params.empty()) u.remove_query();
  o.uri = std::string(u.encoded_target());
}

Original ReadOriginal(const Services& s, const Request& req) {
  Original o;
  o.https = OverHttps(s, req);
  std::string_view host = LastListed(Field(req, "X-Forwarded-Host"));
  o.host = std::string(host.empty() ? std::string_view(req.host) : host);
  std::string_view uri = Field(req, "X-Forwarded-Uri");
  if (uri.empty()) uri = Field(req, "X-Original-URI");
  o.uri = uri.empty() || uri.front() != '/' ? std::string("/") : std::string(uri);
  std::string_view method = Field(req, "X-Forwarded-Method");
  o.method = method.empty() ? std::string(http::to_string(req.method)) : AsciiUpper(method);
  TakePass(o);
  return o;
}

// Whether the request asked about is a page load in a browser: a GET navigation
// (Sec-Fetch-Mode: navigate, or, from browsers that send no Sec-Fetch-Mode, one that accepts
// HTML). Only those are let in on the spot: an uptime probe, a link preview or `curl -I` gets
// the waiting answer and takes no slot.
bool LooksLikeNavigation(const Request& req, const Original& original) {
  if (original.method != "GET") return false;
  std::string_view mode = Field(req, "Sec-Fetch-Mode");
  if (!mode.empty()) return mode == "navigate";
  return Field(req, "Accept").find("text/html") != std::string_view::npos;
}

// The value of cookie `name` in a Cookie header ("a=1; b=2"), empty when absent.
std::string_view CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t end = header.find(';');
    std::string_view pair = header.substr(0, end);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) {
      std::string_view value = pair.substr(eq + 1);
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      return value;
    }
    if (end == std::string_view::npos) break;
    header.remove_prefix(end + 1);
  }
  return {};
}

std::string CookieLine(const GateSettings& settings, std::string_view room, std::string_view value,
                       bool secure, bool clear) {
  std::string line = fmt::format("{}={}; Path=/; HttpOnly; SameSite=Lax",
                                 settings.CookieName(room, secure), value);
  if (secure) line += "; Secure";
  if (!settings.cookie_domain.empty()) line += "; Domain=" + settings.cookie_domain;
  if (clear) line += "; Max-Age=0";
  return line;
}

// Where anteroom's own pages are, as the page's browser reaches them: --public-url, or the
// site's root.
std::string PublicBase(const Services& s) { return s.web.Get()->public_url; }

std::string WaitUrl(const Services& s, std::string_view room, const Original& original) {
  std::string url = fmt::format("{}/wait/{}?return={}", PublicBase(s), room,
                                urls::encode(original.Url(), urls::unreserved_chars));
  if (!original.pass.empty()) {
    url += fmt::format("&{}={}", kPassParam, urls::encode(original.pass, urls::unreserved_chars));
  }
  return url;
}

bool AcceptsJson(const Request& req) {
  std::string_view accept = Field(req, "Accept");
  return accept.find("application/json") != std::string_view::npos;
}

// Where `url` sends the browser, when it may be gone back to (server/return_url.h): a host the
// room allows (its target_url's, its gate.hosts, --gate-host, the one this request came to),
// never from https down to http.
std::optional<std::string> AllowedReturn(const Services& s, const GateRoom& room,
                                         const Request& req, std::string_view url) {
  std::vector<std::string> allowed;
  if (room.info.config.target_url) {
    auto target = urls::parse_absolute_uri(*room.info.config.target_url);
    if (target && target->has_authority()) {
      std::string authority = AsciiLower(target->encoded_host());
      if (target->has_port()) authority += ":" + std::string(target->port());
      allowed.push_back(std::move(authority));
    }
  }
  for (const std::string& h : room.settings->hosts) allowed.push_back(AsciiLower(h));
  for (const std::string& h : s.web.Get()->gate_hosts) allowed.push_back(AsciiLower(h));
  allowed.push_back(AsciiLower(HereHost(s, req)));
  return AllowedReturnUrl(url, allowed, OverHttps(s, req));
}

// No body: nginx keeps an auth_request connection alive only when the answer has none (it asks
// for the head alone), and the proxies read nothing but the status and headers.
Response Pass(std::string_view room, std::string_view session) {
  Response r;
  r.content_type.clear();
  r.headers.emplace_back("X-Anteroom-Room", std::string(room));
  if (!session.empty()) r.headers.emplace_back("X-Anteroom-Session", std::string(session));
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// The answer that sends the page to wait (or tells an app about the line).
Response Wait(const Services& s, const Request& req, const GateRoom& room, const Original& original,
              std::optional<std::string> clear_cookie) {
  std::string location = WaitUrl(s, room.info.room, original);
  Response r;
  r.headers.emplace_back("Cache-Control", "no-store");
  if (clear_cookie) r.headers.emplace_back("Set-Cookie", std::move(*clear_cookie));
  const std::string* proxy = req.Query("proxy");
  const bool nginx = proxy != nullptr && *proxy == "nginx";
  if (AcceptsJson(req)) {
    // An app shows its own waiting UI: the line, and the live channel that joins it. nginx's
    // auth_request takes any status but 2xx/401/403 for a failure (a 500 to the client): 401
    // and the Location there too, which the documented config answers as 429.
    const int64_t retry_ms = 2000;
    r.status = nginx ? 401 : 429;
    if (nginx) r.headers.emplace_back("Location", location);
    r.headers.emplace_back("Retry-After", "2");
    // The fields of a check's status (nothing joined yet: no session, no token, no estimate),
    // and the gate's own.
    r.body = json::serialize(json::object{
        {"room", room.info.room},
        {"session", nullptr},
        {"status", "waiting"},
        {"position", room.info.waiting + 1},
        {"waiting", room.info.waiting},
        {"active", room.info.active},
        {"capacity", room.info.effective.capacity},
        {"eta_ms", nullptr},
        {"phase", core::ToString(room.info.phase)},
        {"queueing_method", core::ToString(room.info.effective.queueing_method)},
        {"refresh_after_ms", retry_ms},
        {"starts_in_ms", nullptr},
        {"ends_in_ms", nullptr},
        {"odds", nullptr},
        {"token", nullptr},
        {"retry_after_ms", retry_ms},
        {"live", PublicBase(s) + "/v1/rooms/" + room.info.room + "/ws"},
        {"enter", PublicBase(s) + "/v1/gate/" + room.info.room + "/enter"},
        {"wait_url", location},
    });
    return r;
  }
  r.status = nginx ? 401 : 302;
  r.headers.emplace_back("Location", location);
  r.content_type.clear();  // no body (see Pass)
  return r;
}

// How often an admitted session's activity is told to the room: often enough for its idle
// timer (a quarter of it), at most once every 5 s.
int64_t TouchEvery(const GateRoom& room) {
  int64_t every = 5000;
  if (room.info.config.idle_timeout_ms)
    every = std::min(every, *room.info.config.idle_timeout_ms / 4);
  return std::max<int64_t>(every, 100);
}

// Whether a visitor with no admission may be let in at once: a free slot, nobody waiting,
// nothing the room asks of a joiner that the gate cannot give (a proof of work).
bool FreeNow(const GateRoom& room) {
  const core::RoomInfo& i = room.info;
  return i.waiting == 0 && i.active < i.effective.capacity && !i.config.paused &&
         !i.config.challenge_difficulty;
}

// No admission held: in on the spot when the request is a page load and the room is free,
// else wait. A join that lands in the line after all (the counts were a second old) leaves it
// again at once: the page will join from the waiting page. An admission made on the spot goes
// straight into its grace (a leave, not final): it holds the slot for the room's grace_ms
// until a second request brings the cookie back (a gated request with the cookie is activity,
// which ends grace; so is a bypassed one, NoteBypassedVisit), so a client that keeps no cookies
// costs a slot for the grace, not for the idle timeout.
void LetInOnTheSpotOrWait(Services& s, const Request& req, std::shared_ptr<const GateRoom> room,
                          Original original, std::optional<std::string> clear_cookie,
                          Respond respond) {
  if (!FreeNow(*room) || !LooksLikeNavigation(req, original)) {
    return respond(Wait(s, req, *room, original, std::move(clear_cookie)));
  }
  std::string id = NewRandomId();
  ArrivalRead arrival = ReadArrival(req, s, room->info.room, id, nullptr, nullptr);
  s.backend.Check(
      room->info.room, id, std::move(arrival.arrival),
      [&s, room, id, original = std::move(original), clear_cookie = std::move(clear_cookie),
       accepts_json = AcceptsJson(req),
       nginx = req.Query("proxy") != nullptr && *req.Query("proxy") == "nginx",
       respond = std::move(respond)](OpResult<core::SessionView> v) mutable {
        // The request is gone by now: what Wait reads of it was copied above.
        Request shadow;
        if (accepts_json) shadow.fields.set("Accept", "application/json");
        if (nginx) shadow.query.emplace_back("proxy", "nginx");
        if (!v.ok()) return respond(Wait(s, shadow, *room, original, std::move(clear_cookie)));
        if (v->status != core::SessionStatus::kActive) {
          s.backend.Leave(room->info.room, id, /*final=*/true, [](OpResult<core::SessionView>) {});
          return respond(Wait(s, shadow, *room, original, std::move(clear_cookie)));
        }
        std::string token =
            s.signer.Mint(room->info.room, v->incarnation, v->admission, s.clock.NowMs());
        Response pass = Pass(room->info.room, id);
        pass.headers.emplace_back("Set-Cookie", CookieLine(*room->settings, room->info.room, token,
                                                           original.https, false));
        if (room->info.config.grace_ms <= 0) return respond(std::move(pass));
        s.backend.Leave(room->info.room, id, /*final=*/false,
                        [pass = std::move(pass), respond = std::move(respond)](
                            OpResult<core::SessionView>) mutable { respond(std::move(pass)); });
      });
}

// A bypassed request that carries an admission cookie: the visitor is there (a page's own
// stylesheet or script, moments after the page), which confirms an admission made on the spot
// as well as any gated request would. Told to the room in the background, at most once per
// admission per TouchEvery, so a bypassed asset still costs only an HMAC and a cache lookup.
void NoteBypassedVisit(Services& s, const GateRoom& room, std::string_view cookie) {
  if (cookie.empty()) return;
  std::optional<core::TokenClaims> claims =
      ClaimsOfRoom(s.signer, cookie, room.info.room, s.clock.NowMs());
  if (!claims) return;
  // '#' is in no session id: these keys never meet the sessions' own.
  std::string key = fmt::format("#{}#{}", claims->incarnation, claims->admission);
  if (!s.gate->ShouldTouch(room.info.room, key, TouchEvery(room))) return;
  s.backend.AdmissionHolder(
      room.info.room, claims->incarnation, claims->admission,
      [&s, name = room.info.room](OpResult<std::optional<std::string>> holder) {
        if (!holder.ok()) return;
        const std::optional<std::string> session = std::move(*holder);
        if (session) s.backend.Touch(name, *session, [](OpResult<core::SessionView>) {});
      });
}

// --- Handlers ------------------------------------------------------------------------------------

// The decision for a room that is known: `req` is read before anything waits (what the
// answer needs later is copied).
void Decide(Services& s, const Request& req, std::shared_ptr<const GateRoom> room,
            Respond respond) {
  const std::string& name = room->info.room;
  Original original = ReadOriginal(s, req);
  std::string_view cookie =
      CookieValue(Field(req, "Cookie"), room->settings->CookieName(name, original.https));
  // Assets, health checks, partners' webhooks, chosen crawlers: through, without a slot.
  bool bypassed = room->settings->BypassesPath(original.path());
  if (!bypassed && room->settings->HasHeaderRules()) {
    for (const auto& field : req.fields) {
      if (room->settings->BypassesHeader(field.name_string(), field.value())) {
        bypassed = true;
        break;
      }
    }
  }
  if (bypassed) {
    NoteBypassedVisit(s, *room, cookie);
    return respond(Pass(name, ""));
  }
  if (cookie.empty()) {
    return LetInOnTheSpotOrWait(s, req, std::move(room), std::move(original), std::nullopt,
                                std::move(respond));
  }
  // The cookie's token: its signature, its room, and that its admission is still held (an
  // expired token whose admission is held is renewed: the room, not the clock, decides).
  int64_t now = s.clock.NowMs();
  std::optional<core::TokenClaims> claims = ClaimsOfRoom(s.signer, cookie, name, now);
  if (!claims) {
    // Not an admission: cleared on the answer that sends the page to wait.
    std::string clear = CookieLine(*room->settings, name, "", original.https, true);
    return LetInOnTheSpotOrWait(s, req, std::move(room), std::move(original), std::move(clear),
                                std::move(respond));
  }
  // What the answer may still need of the request: the backend may answer on another thread.
  Request shadow;
  for (std::string_view name : {"Accept", "Sec-Fetch-Mode", "X-Forwarded-Method"}) {
    if (!Field(req, name).empty()) shadow.fields.set(name, Field(req, name));
  }
  if (const std::string* p = req.Query("proxy")) shadow.query.emplace_back("proxy", *p);
  shadow.method = req.method;
  shadow.peer = req.peer;
  shadow.forwarded_for = req.forwarded_for;
  shadow.host = req.host;
  s.backend.AdmissionHolder(
      name, claims->incarnation, claims->admission,
      [&s, room, claims = *claims, now, original = std::move(original), shadow = std::move(shadow),
       respond = std::move(respond)](OpResult<std::optional<std::string>> holder) mutable {
        if (!holder.ok() && holder.status() != OpStatus::kUnknownRoom) {
          return respond(ErrorReply(holder));
        }
        if (!holder.ok() || !*holder) {
          std::string clear =
              CookieLine(*room->settings, room->info.room, "", original.https, true);
          return LetInOnTheSpotOrWait(s, shadow, room, std::move(original), std::move(clear),
                                      std::move(respond));
        }
        const std::string& session = **holder;
        const std::string& name = room->info.room;
        if (s.gate->ShouldTouch(name, session, TouchEvery(*room))) {
          s.backend.Touch(name, session, [](OpResult<core::SessionView>) {});
        }
        Response pass = Pass(name, session);
        // Past half its life (or expired): a fresh token for the same admission.
        if (now / 1000 >= claims.iat + s.signer.ttl_ms() / 2000) {
          std::string token = s.signer.Mint(name, claims.incarnation, claims.admission, now);
          pass.headers.emplace_back(
              "Set-Cookie", CookieLine(*room->settings, name, token, original.https, false));
        }
        respond(std::move(pass));
      });
}

// ANY /v1/gate/{room}: the decision, for the request the proxy names. It answers the proxy
// only: its pass names the session, which is the session's credential, so a page must never
// read it. A request that came in through the public passage of the example configs (which
// set X-Forwarded-Prefix there, and block this path) is refused as if there were no route.
void CmdGate(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  if (!Field(req, "X-Forwarded-Prefix").empty()) {
    return respond(ErrorReply(OpStatus::kNotFound, wire::kGateDecisionForProxy));
  }
  if (std::shared_ptr<const GateRoom> room = s.gate->Cached(req.params[0])) {
    return Decide(s, req, std::move(room), std::move(respond));
  }
  // Read at most once a second per room: the request is kept for it.
  auto held = std::make_shared<Request>(req);
  s.gate->Fetch(req.params[0], [&s, held, respond = std::move(respond)](
                                   OpResult<std::shared_ptr<const GateRoom>> found) mutable {
    if (!found.ok()) return respond(ErrorReply(found));
    Decide(s, *held, std::move(*found), std::move(respond));
  });
}

// What enter and leave read of the request once the room is known.
Request Forwarded(const Request& req) {
  Request shadow;
  shadow.host = req.host;
  shadow.peer = req.peer;
  shadow.fields.set("X-Forwarded-Host", Field(req, "X-Forwarded-Host"));
  shadow.fields.set("X-Forwarded-Proto", Field(req, "X-Forwarded-Proto"));
  return shadow;
}

// POST /v1/gate/{room}/enter {"token", "return"?}: the waiting page, admitted, hands its token
// over; the answer sets the cookie and says where to go: `return` (rebuilt) when the room
// allows it, else the room's target_url.
void CmdEnter(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kRoomNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto token = ReadString(in.body(), "token");
  if (!token.ok()) return respond(ErrorReply(token));
  if (!*token) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::FieldRequired("token")));
  auto back = ReadString(in.body(), "return");
  if (!back.ok()) return respond(ErrorReply(back));
  core::TokenCheck check = s.signer.Verify(**token, s.clock.NowMs());
  if (check.problem != core::TokenProblem::kNone || check.claims.room != req.params[0]) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kGateNotAdmitted));
  }
  const bool secure = OverHttps(s, req);
  s.gate->Room(req.params[0], [&s, token = std::move(**token), claims = check.claims,
                               back = std::move(*back), shadow = Forwarded(req), secure,
                               respond = std::move(respond)](
                                  OpResult<std::shared_ptr<const GateRoom>> found) mutable {
    if (!found.ok()) return respond(ErrorReply(found));
    std::shared_ptr<const GateRoom> room = std::move(*found);
    std::string location;
    if (back) {
      std::optional<std::string> to = AllowedReturn(s, *room, shadow, *back);
      if (!to) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kGateReturn));
      location = std::move(*to);
    } else {
      location = room->info.config.target_url.value_or("/");
    }
    s.backend.AdmissionHolder(
        room->info.room, claims.incarnation, claims.admission,
        [room, token = std::move(token), location = std::move(location), secure,
         respond = std::move(respond)](OpResult<std::optional<std::string>> holder) {
          if (!holder.ok()) return respond(ErrorReply(holder));
          if (!*holder)
            return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kGateNotAdmitted));
          Response r = JsonReply(json::object{{"room", room->info.room}, {"location", location}});
          r.headers.emplace_back(
              "Set-Cookie", CookieLine(*room->settings, room->info.room, token, secure, false));
          r.headers.emplace_back("Cache-Control", "no-store");
          respond(std::move(r));
        });
  });
}

// The page behind the site's leave link. Leaving is a change of state, so a link (a GET any
// site can make a visitor's browser send, with the Lax cookie) only asks; the button posts.
// It may not be framed (a click on it could be stolen from under another page).
constexpr std::string_view kLeavePage = R"(<!doctype html>
<html lang=en><meta charset=utf-8><meta name=viewport content="width=device-width,initial-scale=1">
<title>Leave the waiting room</title>
<link rel=icon href="data:,">
<style>body{font:1.1rem/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}
button{font:inherit;padding:.5rem 1.25rem;border:0;border-radius:.4rem;background:#1f4fd1;color:#fff;cursor:pointer}</style>
<main>
<p id=question>Leave, and give your place to the next person?</p>
<button id=leave-confirm type=button>Leave</button>
<p id=done hidden>You have left the waiting room. Your place has been given to the next person.</p>
<p id=failed role=alert hidden></p>
</main>
<script>
(() => {
  const button = document.getElementById('leave-confirm');
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const r = await fetch(location.pathname + location.search,
        { method: 'POST', credentials: 'same-origin', cache: 'no-store' });
      const answer = await r.json();
      if (!r.ok) throw new Error(answer.message || String(r.status));
      if (answer.location) return location.replace(answer.location);
      document.getElementById('question').hidden = true;
      button.hidden = true;
      document.getElementById('done').hidden = false;
    } catch (e) {
      const failed = document.getElementById('failed');
      failed.textContent = 'Could not leave: ' + e.message;
      failed.hidden = false;
      button.disabled = false;
    }
  });
})();
</script>
</html>
)";

// GET /v1/gate/{room}/leave[?return=URL]: the page that asks; nothing changes.
void CmdLeavePage(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  s.gate->Room(req.params[0], [respond = std::move(respond)](
                                  OpResult<std::shared_ptr<const GateRoom>> found) mutable {
    if (!found.ok()) return respond(ErrorReply(found));
    Response r;
    r.content_type = "text/html; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-store");
    r.headers.emplace_back("Content-Security-Policy", "frame-ancestors 'none'");
    r.headers.emplace_back("X-Frame-Options", "DENY");
    r.body = std::string(kLeavePage);
    respond(std::move(r));
  });
}

// POST /v1/gate/{room}/leave[?return=URL]: leaves for good (the slot is freed at once) and
// clears the cookie; answers {"room", "left", "location"}: `return` (rebuilt) when the room
// allows it, else null. Same origin only: the router refuses another Origin, and a browser's
// Sec-Fetch-Site must say same-origin (or none: typed or bookmarked).
void CmdLeave(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kRoomNames})) return respond(std::move(*bad));
  std::string_view site = Field(req, "Sec-Fetch-Site");
  if (!site.empty() && site != "same-origin" && site != "none") {
    return respond(ErrorReply(OpStatus::kOriginNotAllowed, wire::kGateLeaveCrossSite));
  }
  const std::string* back = req.Query("return");
  std::string cookie_header(Field(req, "Cookie"));
  s.gate->Room(req.params[0], [&s, shadow = Forwarded(req), secure = OverHttps(s, req),
                               back = back ? std::optional<std::string>(*back) : std::nullopt,
                               cookie_header = std::move(cookie_header),
                               respond = std::move(respond)](
                                  OpResult<std::shared_ptr<const GateRoom>> found) mutable {
    if (!found.ok()) return respond(ErrorReply(found));
    std::shared_ptr<const GateRoom> room = std::move(*found);
    const std::string& name = room->info.room;
    std::optional<std::string> to;
    if (back) to = AllowedReturn(s, *room, shadow, *back);
    auto answer = [room, to, clear = CookieLine(*room->settings, name, "", secure, true),
                   respond](bool left) {
      Response r = JsonReply(json::object{{"room", room->info.room},
                                          {"left", left},
                                          {"location", to ? json::value(*to) : nullptr}});
      r.headers.emplace_back("Set-Cookie", clear);
      r.headers.emplace_back("Cache-Control", "no-store");
      respond(std::move(r));
    };
    std::optional<core::TokenClaims> claims =
        ClaimsOfRoom(s.signer, CookieValue(cookie_header, room->settings->CookieName(name, secure)),
                     name, s.clock.NowMs());
    if (!claims) return answer(false);
    s.backend.AdmissionHolder(
        name, claims->incarnation, claims->admission,
        [&s, name, answer](OpResult<std::optional<std::string>> holder) {
          if (!holder.ok() || !*holder) return answer(false);
          s.backend.Leave(name, **holder, /*final=*/true,
                          [answer](OpResult<core::SessionView> left) { answer(left.ok()); });
        });
  });
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterGateRoutes(Router& router, Services& s) {
  using namespace route_table;
  constexpr size_t kBody = kDefaultBodyLimit;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      // The decision: whatever the method of the request it is asked about.
      {verb::get, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::head, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::post, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::put, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::patch, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::delete_, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::options, "/v1/gate/{room}", kPublic, kBody, kProxied, kPlain, CmdGate},
      {verb::post, "/v1/gate/{room}/enter", kSession, kBody, kNoCors, kPlain, CmdEnter},
      {verb::get, "/v1/gate/{room}/leave", kSession, kBody, kNoCors, kPlain, CmdLeavePage},
      {verb::post, "/v1/gate/{room}/leave", kSession, kBody, kNoCors, kPlain, CmdLeave},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
