#pragma once
// A webhook (PUT /v1/webhooks/{name}, admin): where lifecycle events of chosen types go, each
// as one POST signed the way the Standard Webhooks specification says. Kept as a config entry
// (store/backend.h ConfigEntry, kind "webhook") whose value is the stored JSON below, so it is
// as durable as a room and shared by every process on a Redis. Its deliveries are jobs of its
// own queue (WebhookQueue): retried, dead-lettered and redriven as any queue's.
//
// Stored: {"url", "types": [...], "rooms": [...], "queues": [...], "created_at_ms",
//          "secrets": [{"secret": "whsec_...", "created_at_ms", "expires_at_ms"?}] (newest first),
//          "disabled_at_ms"?, "disabled_reason"?}

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/op_status.h"
#include "server/event_feed.h"
#include "store/backend.h"
#include "store/lifecycle_event.h"

namespace anteroom::server {

inline constexpr std::string_view kWebhookKind = "webhook";
inline constexpr size_t kMaxWebhooks = 32;
inline constexpr size_t kMaxWebhookNameBytes = 64;
inline constexpr size_t kMaxWebhookFilterNames = 100;  // rooms, and queues, each
// After a rotation the previous secret still signs for this long (receivers move over).
inline constexpr int64_t kSecretOverlapMs = 24 * 3'600'000;
// Delivery attempts (Standard Webhooks' schedule: at once, then after 5 s, 5 min, 30 min, 2 h,
// 5 h, 10 h, 10 h; about 28 h in all), each delay spread by +-10%.
inline constexpr int32_t kWebhookAttempts = 8;
int64_t WebhookRetryDelayMs(int32_t attempt_failed);  // the delay after attempt n (1-based)

struct WebhookSecret {
  std::string secret;  // "whsec_" + base64
  int64_t created_at_ms = 0;
  std::optional<int64_t> expires_at_ms;
};

struct Webhook {
  std::string name;
  std::string url;
  EventFilter filter;               // types (never empty) and rooms
  std::vector<std::string> queues;  // empty: every queue's events (of the types asked for)
  int64_t created_at_ms = 0;
  std::vector<WebhookSecret> secrets;  // newest first
  std::optional<int64_t> disabled_at_ms;
  std::string disabled_reason;

  // Whether `e` goes to this webhook (enabled, its type asked for, its room or queue in the
  // lists given).
  bool Wants(const store::LifecycleEvent& e) const;
  // The secrets that sign a delivery made now: newest first, none that has expired.
  std::vector<std::string> SigningSecrets(int64_t now_ms) const;
};

// The queue of a webhook's deliveries.
std::string WebhookQueue(std::string_view name);
bool IsValidWebhookName(std::string_view name);

// The PUT body: {"url": http(s) URL without user info (<= webhook::kMaxWebhookUrlBytes), "types":
// [event type, ...] (at least one, each known), "rooms"?: [name, ...], "queues"?: [name, ...]}.
// Other fields are refused by name. Only what the body says: name, secrets and times are the
// route's.
OpResult<Webhook> ReadWebhookPut(const boost::json::object& body);

// The config entry's value, and back (nullopt: not one this build wrote).
std::string StoreWebhook(const Webhook& w);
std::optional<Webhook> LoadWebhook(const store::ConfigEntry& entry);

// As GET answers it: name, url, types, rooms, queues, created_at, secrets (only how many and
// until when each signs, never the secret), disabled_at and disabled_reason (null when enabled),
// queue (where its deliveries are).
boost::json::object WebhookJson(const Webhook& w);

}  // namespace anteroom::server
