#pragma once
// Outcome codes of every request path, and the value-or-error type that carries them.
// Exceptions are for start-up only; request paths return OpResult (see docs/design.md).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace anteroom {

enum class OpStatus : uint8_t {
  kOk,
  kInvalidJson,      // body is not JSON, or not an object
  kInvalidArgument,  // a field has the wrong type or range
  kUnauthorized,     // admin key missing or wrong
  kNotFound,         // no such route
  kUnknownRoom,
  kUnknownSession,
  kUnknownJob,
  kUnknownWebhook,
  kUnknownSchedule,
  kUnknownBatch,
  kUnknownBackup,  // a backup that is not open here, or a file it does not have
  kMethodNotAllowed,
  kConflict,
  kPayloadTooLarge,
  kRequestTimeout,     // the request's head or body did not arrive in time
  kHeaderTooLarge,     // the request's head is over the server's limit
  kRateLimited,        // a per-client limit: retry after the Retry-After header
  kChallengeRequired,  // joining this room takes a solved proof-of-work puzzle
  kLimitReached,       // a server-wide cap on things clients create (--max-rooms, --max-queues)
  kUpgradeRequired,    // a WebSocket route asked without the upgrade
  kOriginNotAllowed,   // a browser page of an origin not allowed to do this (CORS/CSRF)
  kClientCertificateRequired,  // an admin or queue route over TLS without a trusted certificate
  kUnsupportedMediaType,       // a body sent as something other than JSON
  kUnavailable,                // overload or lost backend: retry later, nothing changed
  kInternal,
};

// Every wire-visible error lives here: the JSON "code" and the HTTP status of each OpStatus.
struct WireError {
  int http_status;
  std::string_view code;
};
WireError ToWire(OpStatus status);

template <typename T>
class [[nodiscard]] OpResult {
 public:
  OpResult(T value)
      : status_(OpStatus::kOk), value_(std::move(value)) {}  // NOLINT: implicit by design
  OpResult(OpStatus status, std::string message) : status_(status), message_(std::move(message)) {}

  bool ok() const { return status_ == OpStatus::kOk; }
  OpStatus status() const { return status_; }
  const std::string& message() const { return message_; }
  // With kRateLimited: how long until a retry may succeed, in ms (0: not said). The HTTP layer
  // answers it as Retry-After, in whole seconds rounded up.
  int64_t retry_after_ms() const { return retry_after_ms_; }
  OpResult&& WithRetryAfter(int64_t ms) && {
    retry_after_ms_ = ms;
    return std::move(*this);
  }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  OpStatus status_;
  std::string message_;
  int64_t retry_after_ms_ = 0;
  std::optional<T> value_;
};

// For operations that answer nothing but success.
struct Done {};

}  // namespace anteroom
