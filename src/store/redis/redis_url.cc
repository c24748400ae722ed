#include "store/redis/redis_url.h"

#include <boost/url/parse.hpp>

#include <charconv>

namespace anteroom::store::redis {

namespace {
bool ParsePort(std::string_view text, uint16_t& port) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return false;
  }
  port = static_cast<uint16_t>(value);
  return true;
}

// HOST:PORT or [V6]:PORT.
bool ParseHostPort(std::string_view text, Endpoint& out) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    out.host = std::string(text);
    out.port = 6379;
  } else if (!ParsePort(text.substr(colon + 1), out.port)) {
    return false;
  } else {
    out.host = std::string(text.substr(0, colon));
  }
  if (out.host.size() > 2 && out.host.front() == '[')
    out.host = out.host.substr(1, out.host.size() - 2);
  return !out.host.empty();
}
}  // namespace

std::optional<RedisUrl> ParseRedisUrl(std::string_view text, std::string& error) {
  RedisUrl url;
  std::string_view rest = text;
  if (rest.starts_with("rediss")) {
    url.tls = true;
    rest.remove_prefix(6);
  } else if (rest.starts_with("redis")) {
    rest.remove_prefix(5);
  } else {
    rest = {};
  }
  if (rest.starts_with("+cluster://")) {
    url.cluster = true;
    rest.remove_prefix(11);
  } else if (rest.starts_with("://")) {
    rest.remove_prefix(3);
  } else {
    error =
        "a Redis store is redis://HOST:PORT[/DB] or redis+cluster://HOST:PORT[,HOST:PORT...] "
        "(rediss:// and rediss+cluster:// for TLS)";
    return std::nullopt;
  }
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    // Percent-decoding of the user-info through Boost.URL.
    std::string whole = "redis://" + std::string(credentials) + "@h";  // the view points into it
    auto parsed = boost::urls::parse_uri(whole);
    if (!parsed) {
      error = "bad credentials in the Redis URL";
      return std::nullopt;
    }
    url.user = parsed->user();
    url.password = parsed->password();
  }
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), url.db);
      if (ec != std::errc() || end != db.data() + db.size() || url.db < 0) {
        error = "the Redis database must be a number";
        return std::nullopt;
      }
      if (url.cluster && url.db != 0) {
        error = "Redis Cluster has only database 0";
        return std::nullopt;
      }
    }
  }
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    Endpoint e;
    if (!ParseHostPort(rest.substr(0, comma), e)) {
      error = "bad HOST:PORT in the Redis URL";
      return std::nullopt;
    }
    url.seeds.push_back(std::move(e));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (url.seeds.empty()) {
    error = "the Redis URL names no server";
    return std::nullopt;
  }
  if (!url.cluster && url.seeds.size() > 1) {
    error = url.tls ? "rediss:// takes one server; use rediss+cluster:// for several"
                    : "redis:// takes one server; use redis+cluster:// for several";
    return std::nullopt;
  }
  return url;
}

}  // namespace anteroom::store::redis
