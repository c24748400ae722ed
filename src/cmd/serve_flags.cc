#include "cmd/serve_flags.h"

#include "server/stats_history.h"

namespace anteroom::cmd {

void AddServeFlags(CLI::App& serve, ServeFlags& flags) {
  // Not configurable: a config file names no other config file.
  serve
      .add_option("--config", flags.config,
                  "A TOML file of settings: each flag's long name with _ for - (max_rooms = 10); "
                  "flags given here override it (docs/operations.md)")
      ->configurable(false);
  serve.add_option("--listen", flags.listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  serve
      .add_option("--tls-cert", flags.tls_cert,
                  "PEM certificate chain (leaf first): serve HTTPS and WSS on --listen, TLS 1.2 "
                  "and 1.3 only; re-read with --tls-key on SIGHUP")
      ->check(CLI::ExistingFile);
  serve.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  serve
      .add_option("--tls-client-ca", flags.tls_client_ca,
                  "PEM CA certificates: clients are asked for a certificate, and the admin and "
                  "queue routes need one this CA signed, besides their key (public routes do not)")
      ->check(CLI::ExistingFile);
  serve.add_option("--threads", flags.threads, "I/O threads (default: one per core)");
  serve.add_option("--demo-room", flags.demo_rooms,
                   "Create a room at start: NAME:CAPACITY, admitting to the demo page /demo");
  serve.add_option("--token-ttl-ms", flags.token_ttl_ms, "Lifetime of admission tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1000}, int64_t{604'800'000}));
  serve
      .add_option("--token-alg", flags.token_alg,
                  "Token signature: HS256 (the shared secret), "
                  "EdDSA (Ed25519) or ES256 (P-256); EdDSA/ES256 public keys are published at "
                  "GET /.well-known/jwks.json")
      ->capture_default_str()
      ->check(CLI::IsMember({"HS256", "EdDSA", "ES256"}));
  serve.add_option("--token-key", flags.token_key,
                   "PEM private key that signs tokens (EdDSA, ES256); default: one generated "
                   "at first start and kept in the data directory (or in Redis with --store)");
  serve.add_option("--token-verify-key", flags.token_verify_keys,
                   "PEM key (public or private; repeatable) that still verifies tokens but "
                   "signs none: the previous key during a rotation");
  serve
      .add_option("--max-connections", flags.max_connections,
                  "Connections beyond this are answered 503 and closed (lowered at start to fit "
                  "the file descriptor limit, which is raised to its hard limit)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}));
  serve
      .add_option("--max-rooms", flags.max_rooms,
                  "Rooms this server may hold; creating one more answers 507 (0: no cap)")
      ->capture_default_str();
  serve
      .add_option("--max-queues", flags.max_queues,
                  "Queues (names pushed to) this server may hold; a push to one more answers "
                  "507 (0: no cap). Names that hold nothing are never kept")
      ->capture_default_str();
  serve
      .add_option("--max-buffered-mb", flags.max_buffered_mb,
                  "Request bodies over 64 KiB still arriving may hold this much in all; beyond "
                  "it new ones get 503 and the senders stalled longest are cut")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  serve
      .add_option("--head-timeout-ms", flags.head_timeout_ms,
                  "A request head must arrive whole within this of its first byte (408)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{600'000}));
  serve
      .add_option("--idle-timeout-ms", flags.idle_timeout_ms,
                  "A kept-alive connection with no request for this long is closed")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{3'600'000}));
  serve
      .add_option("--drain-timeout-ms", flags.drain_timeout_ms,
                  "SIGTERM: stop accepting, answer parked long polls, tell live channels to "
                  "reconnect, and exit once every connection has ended or after this long")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  serve
      .add_option("--body-stall-ms", flags.body_stall_ms,
                  "A request body with no new byte for this long is cut (408)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{600'000}));
  serve
      .add_option("--min-body-rate", flags.min_body_rate,
                  "Bytes per second a request body must average once --body-stall-ms has "
                  "passed (408 if slower)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 30));
  serve.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  serve
      .add_option("--log-format", flags.log_format,
                  "text: for people; json: one JSON object a line (time, level, message), for "
                  "log shippers")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  serve.add_option("--data", flags.data, "Data directory: every change is logged there")
      ->capture_default_str();
  serve
      .add_option("--fsync", flags.fsync,
                  "always: answer once synced to disk; everysec: once written to the kernel, "
                  "synced every second; no: let the kernel sync (docs/durability.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"always", "everysec", "no"}));
  serve.add_flag("--memory-only", flags.memory_only,
                 "Keep state in memory only: nothing survives a restart");
  serve
      .add_option("--compact-min-mb", flags.compact_min_mb,
                  "Snapshot when the log since the last one exceeds this and twice the snapshot")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  serve.add_option("--store", flags.store,
                   "Keep state in Redis instead: redis://[:PASSWORD@]HOST:PORT[/DB] or "
                   "redis+cluster://HOST:PORT[,HOST:PORT...] (rediss:// and rediss+cluster:// "
                   "for TLS); processes sharing it serve the same rooms and queues (default: "
                   "$ANTEROOM_REDIS_URL)");
  serve.add_option("--store-file", flags.store_file,
                   "A file holding the --store URL (it may carry the Redis password)");
  serve
      .add_option("--live-tick-ms", flags.live_tick_ms,
                  "How often live channels (WebSocket/SSE) look for changes: at most one "
                  "message per client per tick")
      ->check(CLI::Range(int64_t{10}, int64_t{10'000}));
  serve
      .add_option("--live-chunk", flags.live_chunk,
                  "Messages per chunk when live channels push a change to many clients: the "
                  "line is read again between chunks, and other requests are served")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
      ->capture_default_str();
  serve
      .add_option("--live-heartbeat-ms", flags.live_heartbeat_ms,
                  "Heartbeat interval of live channels")
      ->check(CLI::Range(int64_t{100}, int64_t{600'000}));
  serve.add_option("--redis-prefix", flags.redis_prefix, "Prefix of every Redis key")
      ->capture_default_str();
  serve.add_option("--redis-tls-ca", flags.redis_tls_ca,
                   "With a rediss:// store: PEM file of the CA(s) that signed Redis's "
                   "certificate, trusted instead of the system's (the name or IP in the URL is "
                   "verified either way)");
  serve.add_option("--redis-tls-cert", flags.redis_tls_cert,
                   "With a rediss:// store: PEM client certificate, for Redis's "
                   "tls-auth-clients (with --redis-tls-key)");
  serve.add_option("--redis-tls-key", flags.redis_tls_key,
                   "With a rediss:// store: PEM private key of --redis-tls-cert");
  serve.add_flag("--accept-new-token-secret", flags.accept_new_token_secret,
                 "With --store and no ANTEROOM_TOKEN_SECRET: when Redis holds rooms or queues but "
                 "lost the shared token secret, start with a new one instead of refusing to "
                 "(what was signed with the old one fails; docs/security.md)");
  serve
      .add_option("--redis-secret-check-ms", flags.redis_secret_check_ms,
                  "With --store: how often each process checks that Redis holds its token secret "
                  "(and signing key), putting a lost one back; a process whose secret differs "
                  "from Redis's answers /readyz 503")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{60'000}));
  serve
      .add_option("--stats-interval-ms", flags.stats_interval_ms,
                  "How often rooms and queues are sampled for GET /v1/stats/history (the last "
                  "15 minutes are kept at this interval, the hour one sample a minute)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, server::StatsHistory::kWindowMs));
  serve
      .add_option("--eta-sample-ms", flags.eta_sample_ms,
                  "Per room, one waiting person answered with an ETA is followed to their "
                  "admission at most this often, to measure the ETA's error (the stats history "
                  "and the dashboard); 0: any waiting answer, up to 64 followed per room")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  serve.add_option("--trusted-proxy", flags.trusted_proxies,
                   "A proxy (CIDR, IPv4 or IPv6; repeatable) whose X-Forwarded-For says who the "
                   "client is, for per-client limits; without it the client is the peer address");
  serve.add_option("--webhook-allow", flags.webhook_allow,
                   "An internal destination webhooks may reach (CIDR or host name; repeatable): "
                   "loopback, private and link-local addresses are refused otherwise");
  serve.add_option("--webhook-ca-file", flags.webhook_ca_file,
                   "CA certificates (PEM) that https webhook receivers are verified against "
                   "(default: the system's)");
  serve
      .add_option("--webhook-timeout-ms", flags.webhook_timeout_ms,
                  "How long one webhook delivery may take, from connecting to the answer")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{60'000}));
  serve
      .add_option("--max-clients-per-room", flags.max_clients_per_room,
                  "Clients a room with per-client limits keeps state for; beyond it, joins of "
                  "other clients get 429 until buckets refill")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100'000'000}));
  serve
      .add_option("--draw-chunk", flags.draw_chunk,
                  "Places of an event's draw published into the line per turn (embedded "
                  "backend): the most a draw holds its room between answers")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}));
  serve.add_option("--cors-origin", flags.cors_origins,
                   "An origin (https://shop.example) whose pages may call the public room API "
                   "from the browser; repeatable; * for any. Same origin and the rooms' "
                   "target_url origins always may (docs/security.md)");
  serve.add_option("--queue-key", flags.queue_key,
                   "Key (Authorization: Bearer KEY) that producers and workers need for the queue "
                   "routes (default: $ANTEROOM_QUEUE_KEY; prefer the variable: flags show in ps). "
                   "Without it and with ANTEROOM_ADMIN_KEY set, queue routes need the admin key");
  serve.add_option("--queue-key-file", flags.queue_key_file,
                   "A file holding the queue key (instead of --queue-key or $ANTEROOM_QUEUE_KEY)");
  serve.add_option("--admin-key-file", flags.admin_key_file,
                   "A file holding the admin key (instead of $ANTEROOM_ADMIN_KEY)");
  serve.add_option("--token-secret-file", flags.token_secret_file,
                   "A file holding the token secret (instead of $ANTEROOM_TOKEN_SECRET)");
  serve
      .add_option("--public-url", flags.public_url,
                  "Where browsers reach anteroom's pages and API when a proxy serves it: a path "
                  "on the protected site (/anteroom) or an absolute URL (https://queue.example); "
                  "the gate's redirects and the waiting page use it (docs/gate.md)")
      ->check([](const std::string& v) -> std::string {
        if (v.empty() || v.starts_with("/") || v.starts_with("http://") ||
            v.starts_with("https://")) {
          return v.find_first_of("?#\"\\<> ") == std::string::npos
                     ? std::string()
                     : "no query, fragment, quotes or spaces";
        }
        return "a path starting with / or an http(s) URL";
      });
  serve.add_option("--gate-host", flags.gate_hosts,
                   "A host (shop.example[:port]) the gate may send people back to after the "
                   "waiting page, for every room; repeatable (a room's target_url host and "
                   "gate.hosts always may)");
  serve.add_option("--templates", flags.templates,
                   "Directory of page templates: its wait.html (if any) replaces the built-in "
                   "waiting page at /wait/{room}, and each NAME.html is a template a room's "
                   "page.template selects; read at start-up");
}

}  // namespace anteroom::cmd
