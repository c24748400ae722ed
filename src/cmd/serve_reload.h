#pragma once
// SIGHUP: `anteroom serve` reads its command line and config file again, as at start, and puts
// in place what can change while it runs, without closing a connection: the TLS certificate and
// key (and the client CA file), the CA and client certificate to Redis, the page templates with
// --public-url and --gate-host, the CORS list, the admin and queue keys, the log level. Everything
// is read and checked first; any error keeps every running setting (a half-written file is retried
// by the next SIGHUP). A change to any other setting is named in a warning, on every SIGHUP until a
// restart applies it.

#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cmd/serve_flags.h"
#include "http/http_server.h"
#include "http/origin_policy.h"
#include "http/router.h"
#include "server/families.h"

namespace anteroom::store::redis {
class RedisBackend;
}  // namespace anteroom::store::redis

namespace anteroom::cmd {

// What start-up and SIGHUP both build from the settings.
// The listener's TLS context (nullptr: plain HTTP). Throws on a lone or unreadable pair.
std::shared_ptr<boost::asio::ssl::context> TlsFromFlags(const ServeFlags& flags);
// The pages' options: --templates read, --public-url, --gate-host. Throws on unreadable templates.
server::WebOptions WebOptionsFromFlags(const ServeFlags& flags);

// serve's settings read as at start: the same command line, the config file as it is now.
struct ReadSettings {
  ServeFlags flags;
  std::string description;  // DescribeSettings' lines, secrets masked
  std::string error;        // empty: read and valid
};
ReadSettings ReadServeSettings(const std::vector<std::string>& args);

// The keys (`name = value (source)` lines) whose value differs between two descriptions, and
// the secrets that differ, in key order.
std::vector<std::string> ChangedSettings(const ReadSettings& before, const ReadSettings& after);

// What SIGHUP changes in the running server. Outlive the reloader.
struct ReloadTargets {
  http::HttpServer& server;
  http::Router& router;
  http::OriginPolicy& origins;
  server::WebSettings& web;
  store::redis::RedisBackend* redis = nullptr;  // with --store rediss://: its TLS files reload
};

class ServeReloader {
 public:
  // `args`: serve's command line after `serve`, as given at start.
  ServeReloader(std::vector<std::string> args, ReloadTargets targets);
  // On one thread at a time (the signal's).
  void Reload();

 private:
  std::vector<std::string> args_;
  ReloadTargets targets_;
  ReadSettings started_;  // what this process started with: a change from it needs a restart
  ReadSettings current_;  // what the last successful reload read
};

}  // namespace anteroom::cmd
