#include "store/redis/shared_values.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "store/redis/key_layout.h"
#include "store/redis/redis_tls.h"
#include "store/redis/redis_url.h"

namespace anteroom::store::redis {

namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// While Redis cannot be reached, the values are looked at again this often.
constexpr milliseconds kRetry{250};
// A split value is logged again this often while it lasts.
constexpr std::chrono::seconds kLogAgain{60};
// How often a waiting start-up looks for the key again.
constexpr milliseconds kRestorePoll{100};

// KEYS[1]: a shared key; ARGV[1]: this process's value. Answers 0 when the key holds this
// value, 1 when it was missing and now holds it, 2 when it holds another.
constexpr const char* kCheckScript = R"lua(
local function run(KEYS, ARGV)
  local held = redis.call('GET', KEYS[1])
  if not held then
    redis.call('SET', KEYS[1], ARGV[1])
    return 1
  end
  if held == ARGV[1] then return 0 end
  return 2
end
)lua";

// A ClusterClient on an io_context of its own, for start-up: each call runs the context until
// it is answered, or for at most the timeout and half a second.
class SyncClient {
 public:
  SyncClient(const RedisUrl& url, int64_t timeout_ms, const RedisTlsFiles& tls)
      : timeout_ms_(timeout_ms), client_(io_, url, timeout_ms, TlsContextFor(url, tls)) {}
  ~SyncClient() {
    client_.Close();
    io_.restart();
    io_.poll();
  }

  // "" when Redis answers; else what went wrong.
  std::string Start() {
    std::optional<std::string> error;
    client_.Start([&](std::string e) { error = std::move(e); });
    Run([&] { return error.has_value(); });
    return error ? *error : fmt::format("no answer within {} ms", timeout_ms_);
  }

  Reply Call(const std::string& key, std::vector<std::string> args) {
    std::optional<Reply> reply;
    client_.Call(key, std::move(args), [&](Reply r) { reply = std::move(r); });
    Run([&] { return reply.has_value(); });
    if (!reply) return Reply::Transport(fmt::format("no answer within {} ms", timeout_ms_));
    return std::move(*reply);
  }

 private:
  template <typename Done>
  void Run(Done done) {
    auto deadline = SteadyClock::now() + milliseconds(timeout_ms_ + 500);
    io_.restart();
    while (!done() && SteadyClock::now() < deadline) {
      if (io_.run_one_until(deadline) == 0 && io_.stopped()) break;
    }
  }

  int64_t timeout_ms_;
  boost::asio::io_context io_;
  ClusterClient client_;
};

std::runtime_error CannotRead(const std::string& key, const std::string& why) {
  return std::runtime_error("redis: cannot read " + key + ": " + why);
}

}  // namespace

Claimed ClaimShared(const std::string& url_text, const std::string& prefix, const SharedValue& mine,
                    const ClaimOptions& options) {
  std::string error;
  auto url = ParseRedisUrl(url_text, error);
  if (!url) throw std::runtime_error(error);
  SyncClient redis(*url, options.timeout_ms, options.tls);
  if (std::string problem = redis.Start(); !problem.empty()) {
    throw std::runtime_error("redis at " + url_text + ": " + problem);
  }
  const std::string& key = mine.key;
  auto get = [&]() -> std::optional<std::string> {
    Reply r = redis.Call(key, {"GET", key});
    if (r.type == Reply::Type::kString) return r.str;
    if (r.type == Reply::Type::kNil) return std::nullopt;
    throw CannotRead(key, r.failed() ? r.str : "it holds no string");
  };
  // SET NX (whoever comes first sets it), then what the key holds.
  auto put = [&]() -> std::string {
    Reply r = redis.Call(key, {"SET", key, mine.value, "NX"});
    if (r.failed()) throw std::runtime_error("redis: cannot write " + key + ": " + r.str);
    auto held = get();
    if (!held) throw CannotRead(key, "it was deleted as it was set");
    return *held;
  };

  if (options.configured) {
    std::string held = put();
    if (held != mine.value) return {Claimed::Outcome::kDiffers, ""};
    return {Claimed::Outcome::kFound, held};
  }
  if (auto held = get()) return {Claimed::Outcome::kFound, *held};

  // Missing. Does Redis hold rooms or queues (made with a value now lost)?
  KeyLayout layout(prefix);
  bool state = false;
  for (const std::string& evidence : {layout.Registry(), layout.Names('r'), layout.Names('q')}) {
    Reply r = redis.Call(evidence, {"EXISTS", evidence});
    if (r.failed()) throw CannotRead(evidence, r.str);
    state = state || r.AsInt() > 0;
  }
  if (!state) return {Claimed::Outcome::kCreated, put()};

  spdlog::warn(
      "redis: the {} ({}) is missing while Redis holds rooms or queues: waiting up to {} ms for a "
      "running process to put it back",
      mine.what, key, options.restore_wait_ms);
  auto deadline = SteadyClock::now() + milliseconds(options.restore_wait_ms);
  while (SteadyClock::now() < deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now());
    std::this_thread::sleep_for(std::clamp(left, milliseconds(0), kRestorePoll));
    if (auto held = get()) return {Claimed::Outcome::kRestored, *held};
  }
  if (!options.mint_when_lost) return {Claimed::Outcome::kLost, ""};
  return {Claimed::Outcome::kMinted, put()};
}

// ---- SharedValueWatch ----------------------------------------------------------------------

SharedValueWatch::SharedValueWatch(boost::asio::io_context& io, ClusterClient& client,
                                   std::chrono::milliseconds interval)
    : client_(client), interval_(interval), timer_(io), script_("shared", kCheckScript) {}

SharedValueWatch::~SharedValueWatch() = default;

void SharedValueWatch::Add(SharedValue value) {
  values_.push_back(std::move(value));
  differs_.push_back(false);
  logged_.push_back({});
  CheckNow();
}

void SharedValueWatch::CheckNow() { Check(); }

void SharedValueWatch::Stop() {
  stopped_ = true;
  timer_.cancel();
}

std::string SharedValueWatch::problem() const {
  std::lock_guard lock(mu_);
  return problem_;
}

void SharedValueWatch::Check() {
  if (stopped_ || values_.empty()) return;
  if (checking_) {
    again_ = true;
    return;
  }
  checking_ = true;
  again_ = false;
  timer_.cancel();
  struct Round {
    size_t left = 0;
    bool reached = true;
  };
  auto round = std::make_shared<Round>();
  round->left = values_.size();
  std::weak_ptr<int> alive = alive_;
  // Copies: a value added meanwhile is checked by the next round.
  std::vector<SharedValue> values = values_;
  for (size_t i = 0; i < values.size(); ++i) {
    const SharedValue& v = values[i];
    client_.Eval(script_, {v.key}, {v.value}, [this, alive, round, i, v](Reply r) {
      if (alive.expired() || stopped_) return;
      int code = -1;  // not known: Redis not reached, or refused the script
      if (r.type == Reply::Type::kInteger) {
        code = static_cast<int>(r.integer);
      } else if (r.IsError("WRONGTYPE")) {
        code = 2;  // something else than a value of ours
      }
      if (code < 0) {
        round->reached = false;
      } else {
        auto now = SteadyClock::now();
        bool differs = code == 2;
        if (code == 1) {
          spdlog::warn(
              "redis: the {} ({}) was missing (lost: a restart without persistence, an eviction, "
              "FLUSHALL, DEL?): put back this process's. Set ANTEROOM_TOKEN_SECRET (and "
              "--token-key with EdDSA/ES256) on every process of a Redis deployment "
              "(docs/security.md)",
              v.what, v.key);
        } else if (differs && (!differs_[i] || now - logged_[i] >= kLogAgain)) {
          logged_[i] = now;
          spdlog::error(
              "redis: the {} ({}) holds another value than this process's: what this process signs "
              "and what the other processes sign no longer verify on each other; /readyz answers "
              "503 until it is mended. Restart this process to take "
              "the one Redis holds, or give every process the same ANTEROOM_TOKEN_SECRET (and "
              "--token-key) (docs/security.md)",
              v.what, v.key);
        } else if (!differs && differs_[i]) {
          spdlog::info("redis: the {} ({}) holds this process's value again", v.what, v.key);
        }
        differs_[i] = differs;
      }
      if (--round->left == 0) Finish(round->reached);
    });
  }
}

void SharedValueWatch::Finish(bool reached) {
  checking_ = false;
  std::string problem;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!differs_[i]) continue;
    if (!problem.empty()) problem += "; ";
    problem += fmt::format(
        "{} in Redis is not this process's {}: what this process signs and what the others sign "
        "do not verify on each other (restart it, or give every process the same "
        "ANTEROOM_TOKEN_SECRET / --token-key)",
        values_[i].key, values_[i].what);
  }
  {
    std::lock_guard lock(mu_);
    problem_ = std::move(problem);
  }
  if (again_) return Check();
  Arm(reached ? interval_ : std::min(interval_, std::chrono::milliseconds(kRetry)));
}

void SharedValueWatch::Arm(std::chrono::milliseconds after) {
  if (stopped_) return;
  timer_.expires_after(after);
  std::weak_ptr<int> alive = alive_;
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    Check();
  });
}

}  // namespace anteroom::store::redis
