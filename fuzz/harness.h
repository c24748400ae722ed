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
#include <vector>

#include "common/clock.h"
#include "common/hangup.h"
#include "core/token.h"
#include "http/router.h"
#include "server/families.h"
#include "server/live_hub.h"
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
    auto& sent = sent_.emplace_back();
    sent.answers = std::make_shared<int>(0);
    router_.Dispatch(request, [answers = sent.answers](server::Response response) {
      if (++*answers > 1) Fail("a request answered twice");
      CheckResponse(response);
    });
    sent.hangup = request.hangup;  // set by the router for routes that park
  }

  // The client hangs up, as the connection signals it: parked requests may then go unanswered.
  void HangUp() {
    for (auto& sent : sent_) {
      if (sent.hangup) sent.hangup->Signal();
    }
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
    router_.Dispatch(request, [&answer](server::Response response) {
      CheckResponse(response);
      answer = std::move(response);
    });
    return answer;
  }

  // Lets time pass so every parked long poll (at most 60 s) answers, then checks that every
  // request was answered (but those whose client hung up).
  void Settle() {
    clock_.Advance(61'000);
    backend_.RunDue();
    ioc_.poll();
    for (size_t i = 0; i < sent_.size(); ++i) {
      if (*sent_[i].answers == 0 && !(sent_[i].hangup && sent_[i].hangup->happened())) {
        Fail("a request was not answered", "request " + std::to_string(i));
      }
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
  struct Sent {
    std::shared_ptr<int> answers;
    std::shared_ptr<Hangup> hangup;
  };
  std::vector<Sent> sent_;
};

}  // namespace anteroom::fuzz
