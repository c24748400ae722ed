#pragma once
// In-process handler tests of the families (no sockets): every family's routes registered by
// RegisterAllRoutes over a MemoryBackend with a FakeClock, requests dispatched straight to the
// router and their answers read back (the memory backend answers inline, but for long polls).

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "core/challenge.h"
#include "core/token.h"
#include "http/origin_policy.h"
#include "http/router.h"
#include "server/event_feed.h"
#include "server/families.h"
#include "server/gate_cache.h"
#include "server/live_hub.h"
#include "server/queue_keys.h"
#include "server/stats_history.h"
#include "store/memory/memory_backend.h"

namespace anteroom::server::testing {

inline constexpr std::string_view kAdminKey = "family-admin-key";
inline constexpr std::string_view kQueueKey = "family-queue-key";

class FamilyWorld {
 public:
  // `admin_key` empty: admin routes open; `queue_key` empty: queue routes take the admin key
  // (or are open too, without one). Requests carry the queue key unless told otherwise.
  explicit FamilyWorld(std::string admin_key = std::string(kAdminKey),
                       std::string queue_key = std::string(kQueueKey))
      : backend_(clock_, store::MemoryBackendOptions{.run_timer = false}),
        signer_("family-token-secret", 600'000),
        puzzles_("family-token-secret"),
        live_(backend_, signer_, clock_, ioc_),
        history_(1'000),
        admin_key_(admin_key),
        default_auth_(queue_key.empty() ? std::string() : "Bearer " + queue_key),
        router_(AccessKeys{.admin_key = std::move(admin_key), .queue_key = std::move(queue_key)}),
        services_{backend_, signer_, clock_, &live_, &history_, {}, {}, &puzzles_} {
    router_.SetQueueKeys(queue_keys_);
    services_.queue_keys = queue_keys_.get();
    services_.gate = &gate_;
    services_.events = &events_;
    RegisterAllRoutes(router_, services_);
  }
  ~FamilyWorld() {
    backend_.StopTimer();
    ioc_.poll();
  }

  const Router& router() const { return router_; }
  FakeClock& clock() { return clock_; }
  store::MemoryBackend& backend() { return backend_; }
  const core::TokenSigner& signer() const { return signer_; }
  Services& services() { return services_; }

  // The answer to one request, filled in when it comes (at once, or later for a long poll).
  // `authorization` nullopt: the queue key's (as a worker sends it).
  std::shared_ptr<std::optional<Response>> Dispatch(
      http::verb method, std::string target, std::string body = {},
      std::optional<std::string> authorization = std::nullopt) {
    Request request;
    request.method = method;
    request.target = std::move(target);
    request.body = std::move(body);
    request.authorization = authorization ? std::move(*authorization) : default_auth_;
    auto answer = std::make_shared<std::optional<Response>>();
    router_.Dispatch(request, [answer](Response r) { *answer = std::move(r); });
    return answer;
  }

  // Browsers of these origins may call the public room routes (`--cors-origin`); the rooms'
  // target_url origins are followed as the server follows them.
  void AllowOrigins(std::vector<std::string> origins) {
    origins_ = std::make_shared<OriginPolicy>(
        http::OriginPolicyOptions{.cors_origins = std::move(origins), .trusted_proxies = {}});
    router_.SetOriginPolicy(origins_);
    services_.origins = origins_.get();
  }

  // The answer to a request made whole by the test (headers a browser sends), when it came at
  // once (nullopt: it parked).
  std::optional<Response> SendRequest(Request request) {
    std::optional<Response> answer;
    router_.Dispatch(request, [&answer](Response r) { answer = std::move(r); });
    return answer;
  }

  // The answer to one request, when it came at once (nullopt: it parked).
  std::optional<Response> Send(http::verb method, std::string target, std::string body = {},
                               std::optional<std::string> authorization = std::nullopt) {
    return *Dispatch(method, std::move(target), std::move(body), std::move(authorization));
  }

  // As Send, expecting an answer now.
  Response Call(http::verb method, std::string target, std::string body = {}) {
    std::optional<Response> r = Send(method, std::move(target), std::move(body));
    EXPECT_TRUE(r.has_value()) << "no answer at once";
    return r ? std::move(*r) : NoAnswer();
  }

  // With the admin key.
  Response Admin(http::verb method, std::string target, std::string body = {}) {
    std::optional<Response> r =
        Send(method, std::move(target), std::move(body), "Bearer " + admin_key_);
    EXPECT_TRUE(r.has_value()) << "no answer at once";
    return r ? std::move(*r) : NoAnswer();
  }

 private:
  static Response NoAnswer() {
    Response none;
    none.status = 0;
    return none;
  }

  boost::asio::io_context ioc_;
  FakeClock clock_;
  store::MemoryBackend backend_;
  core::TokenSigner signer_;
  core::PowPuzzles puzzles_;
  LiveHub live_;
  StatsHistory history_;
  std::string admin_key_;
  std::string default_auth_;
  Router router_;
  std::shared_ptr<QueueKeys> queue_keys_ = std::make_shared<QueueKeys>(backend_, clock_);
  GateCache gate_{backend_, clock_};
  EventFeed events_{backend_, ioc_, EventFeedOptions{}};
  Services services_;
  std::shared_ptr<OriginPolicy> origins_;
};

// The value of an answer's header, "" when absent.
inline std::string HeaderOf(const Response& r, std::string_view name) {
  for (const auto& [key, value] : r.headers) {
    if (key == name) return value;
  }
  return "";
}

// The JSON body of an answer (null when it is not JSON).
inline boost::json::value Json(const Response& r) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(r.body, ec);
  return ec ? boost::json::value() : v;
}

// The error code of an error answer, "" otherwise.
inline std::string ErrorCode(const Response& r) {
  boost::json::value v = Json(r);
  if (!v.is_object() || !v.as_object().contains("error")) return "";
  return std::string(v.at("error").at("code").as_string());
}

inline std::string ErrorMessage(const Response& r) {
  boost::json::value v = Json(r);
  if (!v.is_object() || !v.as_object().contains("error")) return "";
  return std::string(v.at("error").at("message").as_string());
}

}  // namespace anteroom::server::testing
