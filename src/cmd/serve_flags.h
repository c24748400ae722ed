#pragma once
// The flags of `anteroom serve`, apart from what serving does with them: the config file
// (config_file.h) and `anteroom config check` fill the same options, so each flag's own
// validation applies to a file's value too.

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/room_types.h"
#include "store/memory/memory_backend.h"

namespace anteroom::cmd {

struct ServeFlags {
  std::string listen = "127.0.0.1:8080";
  // TLS on the listener (http/tls_context.h): both or neither; re-read on SIGHUP.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;  // admin and queue routes then need a certificate it signed
  unsigned threads = 0;
  std::vector<std::string> demo_rooms;  // NAME:CAPACITY
  int64_t live_tick_ms = 250;           // how often live channels look for changes
  int64_t live_chunk = 2'048;           // messages per chunk of a live delivery round
  int64_t live_heartbeat_ms = 15'000;
  int64_t token_ttl_ms = 600'000;
  std::string token_alg = "HS256";             // HS256 | EdDSA | ES256
  std::string token_key;                       // PEM private key file (EdDSA, ES256)
  std::vector<std::string> token_verify_keys;  // PEM files of older keys, verify only
  std::string log_level = "info";
  std::string log_format = "text";  // text | json (one object a line, for log shippers)
  size_t max_connections = 100'000;
  size_t max_buffered_mb = 256;
  size_t max_rooms = 10'000;
  size_t max_queues = 10'000;
  int64_t head_timeout_ms = 10'000;
  int64_t idle_timeout_ms = 120'000;
  int64_t drain_timeout_ms = 10'000;  // SIGTERM: how long connections may take to end
  int64_t body_stall_ms = 10'000;
  size_t min_body_rate = 1024;
  std::string data = "anteroom-data";
  std::string fsync = "everysec";
  bool memory_only = false;
  uint64_t compact_min_mb = 64;
  std::string store;  // redis://... or redis+cluster://...: state in Redis, no data directory
  std::string redis_prefix = "anteroom:";
  // With a rediss:// store: the CA to trust instead of the system's, the client certificate.
  std::string redis_tls_ca;
  std::string redis_tls_cert;
  std::string redis_tls_key;
  int64_t stats_interval_ms = 5000;
  int64_t eta_sample_ms = 5000;  // per room, one waiting person traced this often at most
  std::string templates;         // a directory whose wait.html replaces the built-in waiting page
  std::string public_url;        // where browsers reach anteroom (the gate's redirects)
  std::vector<std::string> gate_hosts;       // hosts the gate may send people back to
  std::vector<std::string> trusted_proxies;  // CIDRs whose X-Forwarded-For is believed
  std::vector<std::string> webhook_allow;    // internal destinations webhooks may reach
  std::string webhook_ca_file;               // CAs for https receivers (default: the system's)
  int64_t webhook_timeout_ms = 10'000;
  std::vector<std::string> cors_origins;  // origins whose pages may call the room API
  std::string queue_key;  // --queue-key, else $ANTEROOM_QUEUE_KEY: the kQueue routes' key
  // Secrets read from files (systemd credentials, mounted Kubernetes secrets): what a file holds,
  // trailing newline stripped, replaces the flag or variable it stands for (config_file.h).
  std::string queue_key_file;
  std::string admin_key_file;
  std::string token_secret_file;
  std::string store_file;
  std::string config;  // --config FILE (TOML): every flag's key; the command line overrides it
  // Filled from the sources above by SettleServeFlags, not by flags of their own.
  std::string admin_key;     // $ANTEROOM_ADMIN_KEY or admin_key_file
  std::string token_secret;  // $ANTEROOM_TOKEN_SECRET or token_secret_file
  size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom;
  size_t draw_chunk = store::MemoryBackendOptions{}.draw_chunk;
  bool accept_new_token_secret = false;  // Redis lost the secret: mint one rather than refuse
  int64_t redis_secret_check_ms = 2000;  // how often the shared secret and key are checked
};

// Adds every flag of `serve` to `serve`, bound to `flags`.
void AddServeFlags(CLI::App& serve, ServeFlags& flags);

}  // namespace anteroom::cmd
