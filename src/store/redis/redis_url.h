#pragma once
// Where the Redis store lives: `redis://[:PASSWORD@]HOST:PORT[/DB]` (one server) or
// `redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]` (seeds of a Redis Cluster); with
// `rediss` for `redis` (`rediss://`, `rediss+cluster://`) every connection is TLS (redis_tls.h).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::store::redis {

struct Endpoint {
  std::string host;
  uint16_t port = 6379;
  bool operator==(const Endpoint&) const = default;
};

struct RedisUrl {
  bool cluster = false;
  bool tls = false;  // rediss: TLS to every server, the cluster's discovered nodes too
  std::vector<Endpoint> seeds;
  std::string user;  // empty: the default user
  std::string password;
  int db = 0;
};

// nullopt with `error` set when the text is not such a URL.
std::optional<RedisUrl> ParseRedisUrl(std::string_view text, std::string& error);

}  // namespace anteroom::store::redis
