#include "store/redis/cluster_client.h"

#include <openssl/sha.h>

#include <boost/crc.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "store/redis/redis_tls.h"

namespace anteroom::store::redis {

namespace {
constexpr int kMaxRedirects = 8;  // per attempt
constexpr int kRetryMs = 25;      // TRYAGAIN / CLUSTERDOWN / no owner: again until the deadline

std::string Sha1Hex(std::string_view text) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string hex;
  for (unsigned char c : digest) hex += fmt::format("{:02x}", c);
  return hex;
}

// Redis's answers: FCALL on a Redis 6 ("ERR unknown command `FCALL`, with args ..."), FCALL of
// a function the server does not have ("ERR Function not found"), FUNCTION LOAD of a library
// it has ("ERR Library 'NAME' already exists").
bool IsUnknownCommand(std::string_view error) {
  return error.find("unknown command") != std::string_view::npos;
}
bool IsFunctionNotFound(std::string_view error) {
  return error.find("Function not found") != std::string_view::npos;
}
bool IsLibraryThere(std::string_view error) {
  return error.find("already exists") != std::string_view::npos;
}

}  // namespace

bool ParseRedirect(std::string_view error, std::string_view asked_host, uint16_t& slot,
                   Endpoint& to) {
  // "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381"
  size_t sp1 = error.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : error.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return false;
  unsigned s = 0;
  auto [end, ec] = std::from_chars(error.data() + sp1 + 1, error.data() + sp2, s);
  if (ec != std::errc() || s > 16383) return false;
  slot = static_cast<uint16_t>(s);
  std::string_view addr = error.substr(sp2 + 1);
  size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos) return false;
  to.host = std::string(addr.substr(0, colon));
  if (to.host.empty()) to.host = std::string(asked_host);
  unsigned port = 0;
  std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), port);
  to.port = static_cast<uint16_t>(port);
  return port != 0;
}

std::vector<SlotRange> ParseSlotMap(const Reply& answer, std::string_view asked_host) {
  std::vector<SlotRange> out;
  for (const Reply& range : answer.elements) {
    if (range.elements.size() < 3) continue;
    int64_t first = std::max<int64_t>(range.at(0).AsInt(), 0);
    int64_t last = std::min<int64_t>(range.at(1).AsInt(), 16383);
    if (first > last) continue;
    const Reply& master = range.at(2);
    Endpoint e{master.at(0).str, static_cast<uint16_t>(master.at(1).AsInt())};
    if (e.host.empty()) e.host = std::string(asked_host);  // "" means: the node asked
    out.push_back({static_cast<uint16_t>(first), static_cast<uint16_t>(last), std::move(e)});
  }
  return out;
}

uint16_t KeySlot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  boost::crc_optimal<16, 0x1021, 0, 0, false, false> crc;  // CRC16-XMODEM, as Redis Cluster
  crc.process_bytes(key.data(), key.size());
  return static_cast<uint16_t>(crc.checksum() & 16383);
}

Script::Script(std::string_view name, std::string_view body) {
  // The EVAL form keeps the globals before the body's own `local KEYS, ARGV` (if any) hide them,
  // in one local: a body may use all but one of the 200 a Lua function allows.
  source = "local eval_call = {KEYS, ARGV}\n";
  source.append(body);
  source += "\nreturn run(eval_call[1], eval_call[2])\n";
  sha = Sha1Hex(source);
  function = fmt::format("anteroom_{}_{}", name, sha.substr(0, 16));
  library = fmt::format("#!lua name={}\n{}\nredis.register_function('{}', run)\n", function, body,
                        function);
}

struct ClusterClient::Request {
  uint16_t slot = 0;
  bool routed = false;  // false: any server
  std::vector<std::string> args;
  // args[0] is FCALL (args[1] the function) or EVALSHA (args[1] the sha), or EVAL once the
  // server answered NOSCRIPT.
  const Script* script = nullptr;
  bool library_sent = false;  // FUNCTION LOAD was sent for this call
  Callback cb;
  int redirects = 0;
  // A migrating slot answers TRYAGAIN until its keys have moved: retried until this time.
  std::chrono::steady_clock::time_point deadline;
};

ClusterClient::ClusterClient(boost::asio::io_context& io, RedisUrl url, int64_t timeout_ms,
                             std::shared_ptr<RedisTlsContext> tls)
    : io_(io), url_(std::move(url)), timeout_ms_(timeout_ms) {
  if (url_.tls && !tls) tls = TlsContextFor(url_, {});
  conn_options_ = {url_.user, url_.password, url_.db, timeout_ms, url_.tls ? tls : nullptr};
  any_ = NodeFor(url_.seeds.front());
  if (!url_.cluster) slots_.fill(any_);
}

ClusterClient::~ClusterClient() { Close(); }

void ClusterClient::Close() {
  closed_ = true;
  for (auto& [key, conn] : nodes_) conn->Close();
}

std::shared_ptr<Connection> ClusterClient::NodeFor(const Endpoint& e) {
  auto& conn = nodes_[{e.host, e.port}];
  if (!conn) {
    conn = std::make_shared<Connection>(io_, e, conn_options_);
    conn->Start();
  }
  return conn;
}

std::vector<std::shared_ptr<Connection>> ClusterClient::Masters() {
  std::vector<std::shared_ptr<Connection>> out;
  for (const auto& conn : slots_) {
    if (conn && std::find(out.begin(), out.end(), conn) == out.end()) out.push_back(conn);
  }
  if (out.empty()) out.push_back(any_);
  return out;
}

std::shared_ptr<Connection> ClusterClient::NewSubscriber() {
  auto conn = std::make_shared<Connection>(io_, any_->endpoint(), conn_options_);
  conn->Start();
  return conn;
}

void ClusterClient::Start(std::function<void(std::string)> done) {
  if (!url_.cluster) {
    // One PING proves the server answers (and takes the password).
    Call("", {"PING"}, [done](Reply r) { done(r.failed() ? r.str : ""); });
    return;
  }
  RefreshSlots(std::move(done));
}

// CLUSTER SLOTS from a known node (seeds first, then any node seen), replacing the map.
void ClusterClient::RefreshSlots(std::function<void(std::string)> done) {
  if (closed_ || (refreshing_ && !done)) return;
  refreshing_ = true;
  std::vector<Endpoint> candidates = url_.seeds;
  for (auto& [key, conn] : nodes_) candidates.push_back(conn->endpoint());
  Endpoint from = candidates[next_seed_++ % candidates.size()];
  NodeFor(from)->Command({"CLUSTER", "SLOTS"}, [this, done](Reply r) {
    refreshing_ = false;
    if (r.failed() || r.type != Reply::Type::kArray || r.elements.empty()) {
      std::string why = r.failed() ? r.str : "CLUSTER SLOTS answered no slots";
      if (!closed_) spdlog::warn("redis cluster: cannot read the slot map: {}", why);
      if (done) done(why);
      return;
    }
    for (const SlotRange& range : ParseSlotMap(r, url_.seeds.front().host)) {
      auto conn = NodeFor(range.master);
      for (size_t s = range.first; s <= range.last; ++s) slots_[s] = conn;
    }
    if (done) done("");
  });
}

void ClusterClient::Call(std::string_view key, std::vector<std::string> args, Callback cb) {
  auto req = std::make_shared<Request>();
  req->routed = !key.empty();
  if (req->routed) req->slot = KeySlot(key);
  req->args = std::move(args);
  req->cb = std::move(cb);
  req->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  Dispatch(std::move(req), nullptr, false);
}

void ClusterClient::Eval(const Script& script, std::vector<std::string> keys,
                         std::vector<std::string> argv, Callback cb) {
  auto req = std::make_shared<Request>();
  req->routed = !keys.empty();
  if (req->routed) req->slot = KeySlot(keys.front());
  req->script = &script;
  req->args.reserve(3 + keys.size() + argv.size());
  req->args.push_back(functions_ ? "FCALL" : "EVALSHA");
  req->args.push_back(functions_ ? script.function : script.sha);
  req->args.push_back(std::to_string(keys.size()));
  for (auto& k : keys) req->args.push_back(std::move(k));
  for (auto& a : argv) req->args.push_back(std::move(a));
  req->cb = std::move(cb);
  req->deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  Dispatch(std::move(req), nullptr, false);
}

bool ClusterClient::CanRetry(const Request& req) const {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(kRetryMs) < req.deadline;
}

void ClusterClient::Dispatch(std::shared_ptr<Request> req, std::shared_ptr<Connection> conn,
                             bool asking) {
  if (!conn) conn = req->routed ? slots_[req->slot] : any_;
  if (!conn) {  // a slot nobody owns (yet): the map may be stale
    RefreshSlots();
    if (!CanRetry(*req))
      return req->cb(Reply::Transport("redis cluster: no node serves this slot"));
    return RetryLater(std::move(req), kRetryMs);
  }
  if (asking) conn->Command({"ASKING"}, [](Reply) {});
  std::vector<std::string_view> args(req->args.begin(), req->args.end());
  conn->Command(args,
                [this, req, conn, asking](Reply r) { OnReply(req, std::move(r), conn, asking); });
}

void ClusterClient::RetryLater(std::shared_ptr<Request> req, int ms) {
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::milliseconds(ms));
  timer->async_wait([this, timer, req](const boost::system::error_code& ec) mutable {
    if (ec) return req->cb(Reply::Transport("stopped"));
    req->redirects = 0;  // a new attempt
    Dispatch(std::move(req), nullptr, false);
  });
}

void ClusterClient::OnReply(std::shared_ptr<Request> req, Reply reply,
                            std::shared_ptr<Connection> conn, bool asking) {
  if (reply.type == Reply::Type::kError) {
    uint16_t slot;
    Endpoint to;
    if (req->script && req->args[0] == "FCALL" && IsUnknownCommand(reply.str)) {
      functions_ = false;  // Redis 6: scripts go by EVALSHA from now on
      req->args[0] = "EVALSHA";
      req->args[1] = req->script->sha;
      return Dispatch(std::move(req), nullptr, false);
    }
    if (req->script && req->args[0] == "FCALL" && IsFunctionNotFound(reply.str) &&
        !req->library_sent) {
      // This server does not have the library yet (or lost it): load it there (functions are
      // per node: during a slot migration the node that answered after ASK is not the slot's
      // owner), then call it there again. A concurrent load of the same library answers that
      // it exists, which is as good.
      req->library_sent = true;
      std::vector<std::string_view> load{"FUNCTION", "LOAD", req->script->library};
      return conn->Command(load, [this, req, conn, asking](Reply loaded) mutable {
        if (loaded.failed() && !IsLibraryThere(loaded.str)) return req->cb(std::move(loaded));
        Dispatch(std::move(req), std::move(conn), asking);
      });
    }
    if (reply.IsError("NOSCRIPT") && req->script && req->args[0] == "EVALSHA") {
      req->args[0] = "EVAL";  // the server lost its script cache (restart, failover): send it
      req->args[1] = req->script->source;
      return Dispatch(std::move(req), nullptr, false);
    }
    if ((reply.IsError("MOVED") || reply.IsError("ASK")) && ++req->redirects <= kMaxRedirects &&
        ParseRedirect(reply.str, url_.seeds.front().host, slot, to)) {
      auto conn = NodeFor(to);
      if (reply.IsError("ASK")) return Dispatch(std::move(req), conn, true);
      slots_[slot] = conn;
      RefreshSlots();  // one slot moved: others may have too
      return Dispatch(std::move(req), nullptr, false);
    }
    if ((reply.IsError("TRYAGAIN") || reply.IsError("CLUSTERDOWN")) && CanRetry(*req)) {
      return RetryLater(std::move(req), kRetryMs);
    }
  } else if (reply.type == Reply::Type::kTransport && url_.cluster) {
    RefreshSlots();  // the node may have failed over
  }
  req->cb(std::move(reply));
}

}  // namespace anteroom::store::redis
