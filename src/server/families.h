#pragma once
// Each feature is a family: one file of handlers with a Register function that adds its routes.
// Handlers translate HTTP to Backend calls and back; the rules live in src/core.

#include <string>

#include "common/clock.h"
#include "core/challenge.h"
#include "core/token.h"
#include "server/client_address.h"
#include "server/router.h"
#include "store/backend.h"

namespace anteroom::server {

class StatsHistory;
// The browser pages (web_family.cc), as `anteroom serve` configured them.
struct WebOptions {
  std::string wait_template;  // the waiting page template; empty: the built-in web/wait.html
};

// `anteroom serve --templates DIR`: DIR/wait.html, if present, replaces the built-in waiting
// page. Throws std::runtime_error (a start-up failure) when DIR or the file cannot be read.
WebOptions LoadWebOptions(const std::string& templates_dir);

// What the handlers share. Outlives the router and every connection.
class LiveHub;

struct Services {
  store::Backend& backend;
  const core::TokenSigner& signer;
  const Clock& clock;
  LiveHub* live = nullptr;                // the live channel's routes exist only with a hub
  StatsHistory* stats_history = nullptr;  // GET /v1/stats/history answers 503 without it
  WebOptions web = {};
  // Who the client is (`--trusted-proxy`), for per-client limits (server/client_address.h).
  TrustedProxies trusted_proxies = {};
  // Puzzles for rooms with a challenge; without them no proof is accepted and
  // GET /v1/rooms/{room}/challenge answers 503.
  const core::PowPuzzles* puzzles = nullptr;
};

void RegisterHealthRoutes(Router& router, Services& services);
void RegisterRoomRoutes(Router& router, Services& services);
void RegisterTokenRoutes(Router& router, Services& services);
void RegisterQueueRoutes(Router& router, Services& services);
void RegisterLiveRoutes(Router& router, Services& services);
void RegisterMetricsRoutes(Router& router, Services& services);
void RegisterWebRoutes(Router& router, Services& services);

// Every family, in one call: what `anteroom serve` and the tests use.
inline void RegisterAllRoutes(Router& router, Services& services) {
  RegisterHealthRoutes(router, services);
  RegisterRoomRoutes(router, services);
  RegisterTokenRoutes(router, services);
  RegisterQueueRoutes(router, services);
  if (services.live) RegisterLiveRoutes(router, services);
  RegisterMetricsRoutes(router, services);
  RegisterWebRoutes(router, services);
}

}  // namespace anteroom::server
