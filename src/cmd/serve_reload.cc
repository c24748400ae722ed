#include "cmd/serve_reload.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "cmd/config_file.h"
#include "http/tls_context.h"
#include "store/redis/redis_backend.h"

namespace anteroom::cmd {

namespace {

// The settings SIGHUP puts in place; every other key takes effect at a restart. The file keys
// of secrets stand for the secret they hold.
const std::set<std::string, std::less<>> kReloadable = {
    "admin_key",     "admin_key_file", "cors_origin",    "gate_host",     "log_level",
    "public_url",    "queue_key",      "queue_key_file", "redis_tls_ca",  "redis_tls_cert",
    "redis_tls_key", "templates",      "tls_cert",       "tls_client_ca", "tls_key",
};

// `key = value (source)` lines as key -> value.
std::map<std::string, std::string, std::less<>> ValuesOf(const std::string& description) {
  std::map<std::string, std::string, std::less<>> values;
  size_t at = 0;
  while (at < description.size()) {
    size_t end = description.find('\n', at);
    if (end == std::string::npos) end = description.size();
    std::string_view line(description.data() + at, end - at);
    at = end + 1;
    size_t eq = line.find(" = ");
    size_t source = line.rfind(" (");
    if (eq == std::string_view::npos || source == std::string_view::npos || source < eq) continue;
    values.emplace(line.substr(0, eq), line.substr(eq + 3, source - eq - 3));
  }
  return values;
}

}  // namespace

std::shared_ptr<boost::asio::ssl::context> TlsFromFlags(const ServeFlags& flags) {
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    throw std::runtime_error("--tls-cert and --tls-key go together: give both, or neither");
  }
  if (flags.tls_cert.empty()) {
    if (!flags.tls_client_ca.empty()) {
      throw std::runtime_error("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return nullptr;
  }
  return http::MakeServerTlsContext({flags.tls_cert, flags.tls_key, flags.tls_client_ca});
}

server::WebOptions WebOptionsFromFlags(const ServeFlags& flags) {
  server::WebOptions web = server::LoadWebOptions(flags.templates);
  web.public_url = flags.public_url;
  while (!web.public_url.empty() && web.public_url.back() == '/') web.public_url.pop_back();
  web.gate_hosts = flags.gate_hosts;
  return web;
}

ReadSettings ReadServeSettings(const std::vector<std::string>& args) {
  ReadSettings read;
  CLI::App serve{"serve", "serve"};
  AddServeFlags(serve, read.flags);
  for (CLI::Option* opt : serve.get_options()) opt->capture_default_str();
  try {
    serve.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes it last first
  } catch (const CLI::ParseError& e) {
    read.error = e.what();
    return read;
  }
  ServeSettings settings = SettleServeFlags(serve, read.flags);
  if (!settings.ok()) {
    read.error = settings.ErrorText();
    return read;
  }
  read.description = DescribeSettings(serve, read.flags, settings);
  return read;
}

std::vector<std::string> ChangedSettings(const ReadSettings& before, const ReadSettings& after) {
  auto old_values = ValuesOf(before.description);
  auto new_values = ValuesOf(after.description);
  std::set<std::string> changed;
  for (const auto& [key, value] : new_values) {
    auto it = old_values.find(key);
    if (it == old_values.end() || it->second != value) changed.insert(key);
  }
  // Secrets are masked in descriptions: compared as they are.
  if (before.flags.admin_key != after.flags.admin_key) changed.insert("admin_key");
  if (before.flags.queue_key != after.flags.queue_key) changed.insert("queue_key");
  if (before.flags.token_secret != after.flags.token_secret) changed.insert("token_secret");
  if (before.flags.store != after.flags.store) changed.insert("store");
  return {changed.begin(), changed.end()};
}

ServeReloader::ServeReloader(std::vector<std::string> args, ReloadTargets targets)
    : args_(std::move(args)), targets_(targets), started_(ReadServeSettings(args_)) {
  current_ = started_;
}

void ServeReloader::Reload() {
  ReadSettings next = ReadServeSettings(args_);
  if (!next.error.empty()) {
    spdlog::error("SIGHUP: the settings did not read, every running one is kept: {}", next.error);
    return;
  }
  const ServeFlags& was = started_.flags;
  const ServeFlags& now = next.flags;
  std::vector<std::string> restart;
  for (const std::string& key : ChangedSettings(started_, next)) {
    if (!kReloadable.contains(key)) restart.push_back(key);
  }
  // TLS can change its files, not whether it is on: the listener was opened one way.
  bool tls_kept = was.tls_cert.empty() == now.tls_cert.empty() &&
                  was.tls_client_ca.empty() == now.tls_client_ca.empty();
  if (!tls_kept) restart.push_back("tls_cert/tls_client_ca (TLS or client certificates on/off)");

  // Read and checked before anything changes.
  std::shared_ptr<boost::asio::ssl::context> tls;
  server::WebOptions web;
  try {
    if (tls_kept) tls = TlsFromFlags(now);
  } catch (const std::exception& e) {
    spdlog::error(
        "SIGHUP: TLS reload failed, the certificate in use is kept (and every other "
        "running setting): {}",
        e.what());
    return;
  }
  std::shared_ptr<boost::asio::ssl::context> redis_tls;
  try {
    if (targets_.redis && targets_.redis->uses_tls()) {
      redis_tls = store::redis::MakeRedisTlsContext(
          {now.redis_tls_ca, now.redis_tls_cert, now.redis_tls_key});
    }
  } catch (const std::exception& e) {
    spdlog::error(
        "SIGHUP: Redis TLS reload failed, the context in use is kept (and every other running "
        "setting): {}",
        e.what());
    return;
  }
  try {
    web = WebOptionsFromFlags(now);
    [[maybe_unused]] http::OriginPolicy cors_checked(
        {.cors_origins = now.cors_origins, .trusted_proxies = {}});
  } catch (const std::exception& e) {
    spdlog::error("SIGHUP: {}; every running setting is kept", e.what());
    return;
  }

  if (tls) {
    spdlog::info("TLS certificate reloaded: {}", http::DescribeCertificate(*tls));
    targets_.router.http_metrics().SetTlsCertificateExpiry(http::CertificateExpiry(*tls));
    targets_.server.UseTls(std::move(tls));
  }
  if (redis_tls) {
    std::string trusted = now.redis_tls_ca.empty() ? "the system's CAs" : now.redis_tls_ca;
    std::string mine = now.redis_tls_cert.empty()
                           ? "no client certificate"
                           : "client certificate " + http::DescribeCertificate(*redis_tls);
    spdlog::info("Redis TLS reloaded for new connections: trusting {}, {}", trusted, mine);
    targets_.redis->UseTls(std::move(redis_tls));
  }
  targets_.web.Set(std::move(web));
  targets_.origins.SetCorsOrigins(now.cors_origins);
  targets_.router.SetAccessKeys({.admin_key = now.admin_key, .queue_key = now.queue_key});
  spdlog::set_level(spdlog::level::from_str(now.log_level));

  std::vector<std::string> applied;
  for (const std::string& key : ChangedSettings(current_, next)) {
    if (kReloadable.contains(key)) applied.push_back(key);
  }
  spdlog::info("SIGHUP: settings reloaded; changed: {}",
               applied.empty() ? "none" : fmt::format("{}", fmt::join(applied, ", ")));
  for (const std::string& key : restart) {
    spdlog::warn("SIGHUP: {} changed, and takes effect only at a restart", key);
  }
  current_ = std::move(next);
}

}  // namespace anteroom::cmd
