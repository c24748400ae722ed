#pragma once
// Each feature is a family: one file of handlers with a Register function that adds its routes.
// Handlers translate HTTP to Backend calls and back; the rules live in src/core.
//
// The shape of a family file (docs/design.md): one named handler per route (`CmdPush`,
// `CmdCheck`, ...) that reads the request, makes one backend call and writes the answer; then,
// at the bottom, the family's route table (an array of RouteDef) added in one AddRoutes call.
// The table is where a route's access rule (scope), body limit and CORS are read from.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "core/challenge.h"
#include "core/token.h"
#include "server/http_names.h"
#include "store/backend.h"

namespace anteroom::server {

class StatsHistory;
// The browser pages (web_family.cc), as `anteroom serve` configured them.
struct WebOptions {
  std::string wait_template;  // the waiting page template; empty: the built-in web/wait.html
  // Named templates a room's page.template selects: --templates DIR/NAME.html (wait.html is
  // also "wait"). A name not here falls back to the waiting page template.
  std::map<std::string, std::string, std::less<>> templates;
  // Where browsers reach anteroom's own pages and API (`--public-url`): a path on the protected
  // site ("/anteroom") or an absolute URL; empty: the root of the host they came to.
  std::string public_url;
  // Hosts the gate may send people back to, for every room (`--gate-host`).
  std::vector<std::string> gate_hosts;
};

// The pages' options as they stand: SIGHUP replaces them whole (templates re-read) while
// requests go on; a request reads one version, held as long as it uses it.
class WebSettings {
 public:
  WebSettings(WebOptions options = {})  // NOLINT: implicit, as Services is filled
      : current_(std::make_shared<const WebOptions>(std::move(options))) {}
  std::shared_ptr<const WebOptions> Get() const { return current_.load(); }
  void Set(WebOptions options) {
    current_.store(std::make_shared<const WebOptions>(std::move(options)));
  }

 private:
  std::atomic<std::shared_ptr<const WebOptions>> current_;
};

// `anteroom serve --templates DIR`: DIR/wait.html, if present, replaces the built-in waiting
// page; every DIR/NAME.html (NAME of [A-Za-z0-9_-], up to 64) is the template NAME. Throws
// std::runtime_error (a start-up failure) when DIR or the file cannot be read.
WebOptions LoadWebOptions(const std::string& templates_dir);

// What the handlers share. Outlives the router and every connection.
class LiveHub;
class EventFeed;
class QueueKeys;
class GateCache;
class WebhookDispatcher;
class EtaTracer;
class BackupExports;

struct Services {
  store::Backend& backend;
  const core::TokenSigner& signer;
  const Clock& clock;
  LiveHub* live = nullptr;                // the live channel's routes exist only with a hub
  StatsHistory* stats_history = nullptr;  // GET /v1/stats/history answers 503 without it
  WebSettings web = {};
  // Who the client is (`--trusted-proxy`), for per-client limits (http/client_address.h).
  TrustedProxies trusted_proxies = {};
  // Puzzles for rooms with a challenge; without them no proof is accepted and
  // GET /v1/rooms/{room}/challenge answers 503.
  const core::PowPuzzles* puzzles = nullptr;
  // The origins browsers may call from (the router's), told of rooms' target_url changes.
  OriginPolicy* origins = nullptr;
  // Queues' own keys (the router's), told of this process's changes at once.
  QueueKeys* queue_keys = nullptr;
  // The gate's per-process cache of rooms and touches; without it the gate routes are absent.
  GateCache* gate = nullptr;
  // The router's own latency histograms, for GET /metrics: set by RegisterMetricsRoutes.
  const HttpMetrics* http_metrics = nullptr;
  // The admin event stream's readers (server/event_feed.h); without it the stream answers 503.
  EventFeed* events = nullptr;
  // Told when this process changes webhooks, so it dispatches by the new ones at once.
  WebhookDispatcher* webhooks = nullptr;
  // Told of every waiting status this process answers, to follow a sample of them to their
  // admission (server/eta_tracer.h: the measured ETA error); none: nothing is traced.
  EtaTracer* eta = nullptr;
  // The backups of the data directory (embedded backend only); none: the backup routes answer
  // 409 (Redis is backed up with BGSAVE).
  BackupExports* backups = nullptr;
  // The OpenAPI document of every route registered before RegisterOpenApiRoutes (the last).
  std::string openapi_json = {};
};

// A join or check-in of session `id` in `room`, answered as POST /v1/rooms/{room}/check answers
// it (the status object, or the refusal); `nonce` and `solution` are a challenge's proof (may be
// null), `pass` a pass's code. The check route's and the waiting page's JSON mode.
void CheckSession(Services& s, const Request& req, const std::string& room, std::string id,
                  const std::string* nonce, const std::string* solution,
                  std::optional<std::string> pass, Respond respond);

// A route's handler in a family: the services, the request (params checked by the router's
// pattern only), and the one answer.
using FamilyHandler = void (*)(Services&, const Request&, Respond);

// What else a route does (RouteOptions::stream, RouteOptions::parks).
enum class RouteKind : uint8_t {
  kPlain,   // answers now or soon
  kStream,  // may become a live stream
  kParks,   // a long poll: may wait long, watched for a hang-up
};

// One row of a family's route table: every field is written out in each row.
struct RouteDef {
  http::verb method;
  std::string_view pattern;
  Scope scope;
  size_t body_limit;
  Cors cors;
  RouteKind kind;
  FamilyHandler handler;
};

// The words of a route table, for `using namespace route_table;` in a Register function.
namespace route_table {
using enum Scope;
using enum Cors;
using enum RouteKind;
using verb = http::verb;
}  // namespace route_table

// Adds every row of `table` to the router, each handler bound to `services`.
inline void AddRoutes(Router& router, Services& services, std::span<const RouteDef> table) {
  for (const RouteDef& r : table) {
    router.Add(
        r.method, r.pattern,
        [&services, handler = r.handler](const Request& req, Respond respond) {
          handler(services, req, std::move(respond));
        },
        RouteOptions{.scope = r.scope,
                     .body_limit = r.body_limit,
                     .cors = r.cors,
                     .stream = r.kind == RouteKind::kStream,
                     .parks = r.kind == RouteKind::kParks});
  }
}

void RegisterHealthRoutes(Router& router, Services& services);
void RegisterRoomRoutes(Router& router, Services& services);
void RegisterScheduleRoutes(Router& router, Services& services);
void RegisterPassRoutes(Router& router, Services& services);
void RegisterTokenRoutes(Router& router, Services& services);
void RegisterQueueRoutes(Router& router, Services& services);
void RegisterJobScheduleRoutes(Router& router, Services& services);
void RegisterBatchRoutes(Router& router, Services& services);
void RegisterLiveRoutes(Router& router, Services& services);
void RegisterMetricsRoutes(Router& router, Services& services);
void RegisterWebRoutes(Router& router, Services& services);
void RegisterGateRoutes(Router& router, Services& services);
void RegisterLifecycleRoutes(Router& router, Services& services);
void RegisterWebhookRoutes(Router& router, Services& services);
void RegisterBackupRoutes(Router& router, Services& services);
// GET /openapi.json, built from the routes registered so far (server/openapi_doc.h): call it
// last. Throws std::runtime_error (a start-up failure) when a route has no description.
void RegisterOpenApiRoutes(Router& router, Services& services);

// Every family, in one call: what `anteroom serve` and the tests use.
inline void RegisterAllRoutes(Router& router, Services& services) {
  RegisterHealthRoutes(router, services);
  RegisterRoomRoutes(router, services);
  RegisterScheduleRoutes(router, services);
  RegisterPassRoutes(router, services);
  RegisterTokenRoutes(router, services);
  RegisterQueueRoutes(router, services);
  RegisterJobScheduleRoutes(router, services);
  RegisterBatchRoutes(router, services);
  if (services.live) RegisterLiveRoutes(router, services);
  RegisterMetricsRoutes(router, services);
  RegisterWebRoutes(router, services);
  if (services.gate) RegisterGateRoutes(router, services);
  RegisterLifecycleRoutes(router, services);
  RegisterWebhookRoutes(router, services);
  RegisterBackupRoutes(router, services);
  RegisterOpenApiRoutes(router, services);
}

}  // namespace anteroom::server
