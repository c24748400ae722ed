#pragma once
// What the HTTP-side fuzz targets share: the server's routes over a memory backend with a fake
// clock, as `anteroom serve` wires them (every family, the live hub, the stats history, an
// admin key), fresh for each input so no input depends on the ones before it.

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/json/parse.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "core/token.h"
#include "server/families.h"
#include "server/live_hub.h"
#include "server/router.h"
#include "server/stats_history.h"
#include "store/memory/memory_backend.h"

namespace anteroom::fuzz {

// The admin key routes want; the seeds carry it, so the fuzzer reaches the admin handlers.
namespace http = boost::beast::http;

inline constexpr std::string_view kAdminKey = "fuzz-admin-key";

// A failed check: libFuzzer reports the abort as a crash, with the input.
[[noreturn]] inline void Fail(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz check failed: %.*s: %.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

class World {
 public:
  World()
      : backend_(clock_, store::MemoryBackendOptions{.run_timer = false}),
        signer_("fuzz-token-secret", 600'000),
        live_(backend_, signer_, clock_, ioc_),
        history_(1'000),
        router_(std::string(kAdminKey)),
        services_{backend_, signer_, clock_, &live_, &history_, {}} {
    server::RegisterAllRoutes(router_, services_);
  }
  ~World() {
    // Answers parked in the backend (long polls) and the hub's posted work end here.
    backend_.StopTimer();
    ioc_.poll();
  }

  const server::Router& router() const { return router_; }
  store::MemoryBackend& backend() { return backend_; }
  FakeClock& clock() { return clock_; }

  // Dispatches `request` and checks the answer once it comes: exactly once, a known status,
  // and for JSON answers a JSON body; no header can break the response's framing.
  void Dispatch(server::Request& request) {
    ++dispatched_;
    router_.Dispatch(request, [this](server::Response response) {
      ++answered_;
      CheckResponse(response);
    });
  }

  // A request made by the target itself (set-up), with the admin key: its answer, checked,
  // when it came at once (the memory backend answers inline unless a long poll parks).
  std::optional<server::Response> Call(http::verb method, std::string target, std::string body) {
    server::Request request;
    request.method = method;
    request.target = std::move(target);
    request.body = std::move(body);
    request.authorization = "Bearer " + std::string(kAdminKey);
    std::optional<server::Response> answer;
    ++dispatched_;
    router_.Dispatch(request, [this, &answer](server::Response response) {
      ++answered_;
      CheckResponse(response);
      answer = std::move(response);
    });
    return answer;
  }

  // Lets time pass so every parked long poll (at most 60 s) answers, then checks that every
  // request was answered.
  void Settle() {
    clock_.Advance(61'000);
    backend_.RunDue();
    ioc_.poll();
    if (answered_ != dispatched_) {
      Fail("a request was not answered",
           std::to_string(answered_) + " of " + std::to_string(dispatched_));
    }
  }

  static void CheckResponse(const server::Response& r) {
    if (r.stream) return;  // a live stream: no HTTP answer of its own
    if (r.status < 100 || r.status > 599 ||
        boost::beast::http::int_to_status(r.status) == boost::beast::http::status::unknown) {
      Fail("not a valid HTTP status", std::to_string(r.status));
    }
    auto framing_safe = [](std::string_view s) {
      return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
    };
    if (!framing_safe(r.content_type)) Fail("a line break in Content-Type", r.content_type);
    for (const auto& [name, value] : r.headers) {
      if (name.empty() || !framing_safe(name) || !framing_safe(value) ||
          name.find(':') != std::string::npos) {
        Fail("a header that breaks the response", name + ": " + value);
      }
    }
    if (r.content_type == "application/json") {
      boost::system::error_code ec;
      boost::json::parse(r.body, ec);
      if (ec) Fail("a JSON answer that is not JSON", r.body);
    }
  }

 private:
  boost::asio::io_context ioc_;
  FakeClock clock_;
  store::MemoryBackend backend_;
  core::TokenSigner signer_;
  server::LiveHub live_;
  server::StatsHistory history_;
  server::Router router_;
  server::Services services_;
  size_t dispatched_ = 0;
  size_t answered_ = 0;
};

}  // namespace anteroom::fuzz
