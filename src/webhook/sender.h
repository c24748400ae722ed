#pragma once
// One webhook delivery sent over HTTP(S): signed (webhook/signature.h), to a destination the
// allow-list admits (webhook/allow_list.h), bounded in time and in bytes read, and its outcome
// classified for the delivery worker. Retrying, disabling an endpoint on kGone and the
// schedule are the caller's (the delivery worker's): the sender makes exactly one attempt.
//
// One attempt: the URL parsed (webhook/webhook_url.h); the host resolved once; every address
// checked against the allow-list and only the allowed ones connected to (in the resolver's
// order), so a DNS answer that changes between the check and the connection (rebinding) cannot
// matter; TLS 1.2+ with SNI and the certificate verified for the host (https); one `POST`; the
// response's head (at most kMaxResponseHeadBytes) and at most `max_response_bytes` of its body
// read. One deadline, `timeout_ms`, covers all of it, the name's resolution included. Redirects
// are not followed (Standard Webhooks: "3xx: Failure"): a 3xx is kRetry with an error naming the
// refused redirect, so the admin sees it and fixes the URL. A status stands once the head is in:
// a body that then stalls past the deadline or breaks off does not change the outcome (a 2xx is
// delivered: the receiver has said so).
//
// Kept-alive connections: a connection whose exchange ended cleanly (the whole response read,
// within the cap, nothing after it, and the response keeping the connection: not
// `Connection: close`, not an HTTP/1.0 answer without keep-alive, not a body ended by the close)
// is kept idle for the next delivery to the same scheme, host and port, which skips the
// resolution, the allow-list check, the connection and the TLS handshake: the address it is
// connected to was checked when it was opened (the allow-list is the sender's for its life) and
// the certificate verified for that same host. At most `pool_per_destination` idle per
// destination and `pool_total` in all (the least recently used closed first); an idle one is
// closed after `pool_idle_ms`, and none is kept past `pool_max_age_ms` from its opening (so a
// changed DNS answer is seen). Before reuse, an idle connection the server closed or wrote on is
// dropped. A delivery on a reused connection that breaks before any byte of the response (the
// server closed it as the request went: EOF, a reset, a broken pipe) is sent again, once, on a
// new connection (resolved and checked as any), within the same deadline; receivers drop the
// duplicate by its `webhook-id` if the first one did arrive. Every other failure closes the
// connection (no TLS close_notify: nothing more is sent). With `pool_per_destination` 0 nothing
// is kept and every request says `Connection: close`.
//
// Thread-safety: Send may be called from any thread, concurrently. Each delivery runs on its
// own strand of the io_context and its callback runs there, exactly once. A delivery in flight
// holds what it needs, so the sender may be destroyed before its deliveries end; they end when
// they end (at most timeout_ms later) or when the io_context stops (callback not run). Idle
// connections are closed with the sender. While any are idle, a timer on the io_context is
// pending (it closes them when their idle time is up): an io_context run until it has no work
// runs until the sender is destroyed or the idle ones have been closed.

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "webhook/allow_list.h"

namespace anteroom::webhook {

inline constexpr size_t kMaxResponseHeadBytes = 16 * 1024;
// Retry-After beyond a day is read as a day.
inline constexpr int64_t kMaxRetryAfterMs = 24 * 60 * 60 * 1000;

struct WebhookDelivery {
  std::string url;
  // The `webhook-id`: the same on every attempt of one event (receivers dedupe by it). 1-128
  // bytes of [A-Za-z0-9_:-] (names without '.', as the specification asks of the signed id).
  std::string id;
  // `webhook-timestamp`: the attempt's time in seconds, not the event's (receivers refuse a
  // timestamp more than 5 minutes off). 0 or less: the sender's clock when it signs.
  int64_t timestamp_s = 0;
  std::string body;                  // the JSON sent, byte for byte as signed
  std::vector<std::string> secrets;  // "whsec_..." each, newest first; at least one
};

struct WebhookOutcome {
  enum class Kind {
    kDelivered,  // a 2xx
    kRetry,      // network error, timeout, TLS failure, 3xx, 429, 5xx, 4xx but 410
    kGone,       // 410: the receiver wants no more; disable the endpoint
    kRefused,    // a bad URL, a destination not allowed, a bad delivery: never retried
  };
  Kind kind = Kind::kRetry;
  int status = 0;  // the HTTP status; 0 when no response came
  // From Retry-After on a 429 or 503 (seconds or an HTTP-date), capped at kMaxRetryAfterMs.
  std::optional<int64_t> retry_after_ms;
  size_t body_bytes = 0;  // of the response's body read: at most max_response_bytes
  std::string error;      // empty when delivered; short, for logs and the dashboard
};

std::string_view OutcomeKindName(WebhookOutcome::Kind kind);  // "delivered", "retry", ...

// What a final (non-1xx) status means, Retry-After aside.
WebhookOutcome::Kind KindOfStatus(int status);

// Retry-After (RFC 9110 section 10.2.3): delay-seconds, or an HTTP-date (IMF-fixdate, or the
// obsolete RFC 850 and asctime forms) made relative to `now_ms` (Unix ms), at least 0. Capped
// at kMaxRetryAfterMs. nullopt when it is neither.
std::optional<int64_t> ParseRetryAfterMs(std::string_view value, int64_t now_ms);

struct WebhookSenderOptions {
  WebhookAllowList allow;
  int64_t timeout_ms = 10'000;            // resolve + connect + TLS + write + read
  size_t max_response_bytes = 64 * 1024;  // of the response's body; the rest is never read
  std::string ca_file;                    // PEM; with ca_dir empty too: OpenSSL's defaults
  std::string ca_dir;                     // hashed directory (c_rehash)
  std::string user_agent = "anteroom-webhooks";
  // Kept-alive connections (above). Per destination as many as the delivery worker has in
  // flight per webhook (server/webhook_worker.h), so a full batch finds them all again.
  size_t pool_per_destination = 8;    // idle per scheme + host + port; 0: none kept
  size_t pool_total = 64;             // idle in all
  int64_t pool_idle_ms = 30'000;      // an idle connection is closed after this long
  int64_t pool_max_age_ms = 300'000;  // none kept past this age (from its opening)
};

class WebhookSender {
 public:
  // Throws std::runtime_error when the TLS context cannot be set up (a CA file or directory
  // that cannot be loaded): a start-up error.
  WebhookSender(boost::asio::io_context& ioc, WebhookSenderOptions options);
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void Send(WebhookDelivery delivery, std::function<void(WebhookOutcome)> done);

  // Kept-alive connections idle now (any destination).
  size_t IdleConnections() const;

  struct Shared;  // what deliveries in flight share: options, TLS context
  class Pool;     // the idle connections, shared with the deliveries in flight (weakly)

 private:
  boost::asio::io_context& ioc_;
  std::shared_ptr<const Shared> shared_;
  std::shared_ptr<Pool> pool_;
};

}  // namespace anteroom::webhook
