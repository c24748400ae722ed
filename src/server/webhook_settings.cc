#include "server/webhook_settings.h"

#include <boost/json.hpp>

#include <algorithm>
#include <random>

#include "common/names.h"
#include "common/wire_errors.h"
#include "http/json_body.h"
#include "server/event_json.h"
#include "webhook/webhook_url.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

constexpr int64_t kRetryScheduleMs[kWebhookAttempts - 1] = {
    5'000, 300'000, 1'800'000, 7'200'000, 18'000'000, 36'000'000, 36'000'000};

// The sender's own rule (webhook/webhook_url.h), so a URL a PUT takes is one it can send to.
bool ValidUrl(std::string_view text) {
  std::string error;
  return webhook::ParseWebhookUrl(text, error).has_value();
}

// An array of names, each passing `valid`, at most `max`; nullopt when it is not one.
std::optional<std::vector<std::string>> ReadNames(const json::value& v, size_t max,
                                                  bool (*valid)(std::string_view)) {
  const json::array* a = v.if_array();
  if (a == nullptr || a->size() > max) return std::nullopt;
  std::vector<std::string> out;
  for (const json::value& item : *a) {
    const json::string* s = item.if_string();
    if (s == nullptr || !valid(*s)) return std::nullopt;
    if (std::find(out.begin(), out.end(), *s) == out.end()) out.emplace_back(*s);
  }
  return out;
}

bool ValidName(std::string_view name) { return IsValidName(name); }

json::array Strings(const std::vector<std::string>& v) {
  json::array a;
  for (const std::string& s : v) a.emplace_back(s);
  return a;
}

std::vector<std::string> StringsOf(const json::value* v) {
  std::vector<std::string> out;
  if (v == nullptr || !v->is_array()) return out;
  for (const json::value& item : v->get_array()) {
    if (item.is_string()) out.emplace_back(item.get_string());
  }
  return out;
}

}  // namespace

int64_t WebhookRetryDelayMs(int32_t attempt_failed) {
  int32_t k = std::clamp<int32_t>(attempt_failed, 1, kWebhookAttempts - 1) - 1;
  int64_t base = kRetryScheduleMs[k];
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> spread(-base / 10, base / 10);
  return base + spread(rng);
}

bool Webhook::Wants(const store::LifecycleEvent& e) const {
  if (disabled_at_ms) return false;
  const auto& types = filter.types;
  if (std::find(types.begin(), types.end(), e.type) == types.end()) return false;
  if (!e.room.empty()) {
    const auto& rooms = filter.rooms;
    return rooms.empty() || std::find(rooms.begin(), rooms.end(), e.room) != rooms.end();
  }
  return queues.empty() || std::find(queues.begin(), queues.end(), e.queue) != queues.end();
}

std::vector<std::string> Webhook::SigningSecrets(int64_t now_ms) const {
  std::vector<std::string> out;
  for (const WebhookSecret& s : secrets) {
    if (!s.expires_at_ms || now_ms < *s.expires_at_ms) out.push_back(s.secret);
  }
  return out;
}

std::string WebhookQueue(std::string_view name) { return "webhook:" + std::string(name); }

bool IsValidWebhookName(std::string_view name) {
  return IsValidName(name) && name.size() <= kMaxWebhookNameBytes;
}

OpResult<Webhook> ReadWebhookPut(const json::object& body) {
  for (const auto& field : body) {
    std::string_view key = field.key();
    if (key != "url" && key != "types" && key != "rooms" && key != "queues") {
      return {OpStatus::kInvalidArgument, wire::UnknownField(key, wire::kWebhookFields)};
    }
  }
  Webhook w;
  const json::value* url = body.if_contains("url");
  if (url == nullptr || !url->is_string() || !ValidUrl(url->get_string())) {
    return {OpStatus::kInvalidArgument, std::string(wire::kWebhookUrl)};
  }
  w.url = std::string(url->get_string());
  const json::value* types = body.if_contains("types");
  auto known = [](std::string_view t) { return store::IsEventType(t); };
  std::optional<std::vector<std::string>> type_list;
  if (types != nullptr) type_list = ReadNames(*types, 64, +known);
  if (!type_list || type_list->empty()) {
    return {OpStatus::kInvalidArgument, std::string(wire::kWebhookTypes)};
  }
  w.filter.types = std::move(*type_list);
  if (const json::value* rooms = body.if_contains("rooms"); rooms && !rooms->is_null()) {
    auto list = ReadNames(*rooms, kMaxWebhookFilterNames, ValidName);
    if (!list) return {OpStatus::kInvalidArgument, std::string(wire::kWebhookRooms)};
    w.filter.rooms = std::move(*list);
  }
  if (const json::value* queues = body.if_contains("queues"); queues && !queues->is_null()) {
    auto list = ReadNames(*queues, kMaxWebhookFilterNames, ValidName);
    if (!list) return {OpStatus::kInvalidArgument, std::string(wire::kWebhookQueues)};
    w.queues = std::move(*list);
  }
  return w;
}

std::string StoreWebhook(const Webhook& w) {
  json::object o{{"url", w.url},
                 {"types", Strings(w.filter.types)},
                 {"rooms", Strings(w.filter.rooms)},
                 {"queues", Strings(w.queues)},
                 {"created_at_ms", w.created_at_ms}};
  json::array secrets;
  for (const WebhookSecret& s : w.secrets) {
    json::object so{{"secret", s.secret}, {"created_at_ms", s.created_at_ms}};
    if (s.expires_at_ms) so["expires_at_ms"] = *s.expires_at_ms;
    secrets.push_back(std::move(so));
  }
  o["secrets"] = std::move(secrets);
  if (w.disabled_at_ms) {
    o["disabled_at_ms"] = *w.disabled_at_ms;
    o["disabled_reason"] = w.disabled_reason;
  }
  return json::serialize(o);
}

std::optional<Webhook> LoadWebhook(const store::ConfigEntry& entry) {
  boost::system::error_code ec;
  json::value v = json::parse(entry.value, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::object& o = v.get_object();
  Webhook w;
  w.name = entry.name;
  const json::value* url = o.if_contains("url");
  if (url == nullptr || !url->is_string()) return std::nullopt;
  w.url = std::string(url->get_string());
  w.filter.types = StringsOf(o.if_contains("types"));
  w.filter.rooms = StringsOf(o.if_contains("rooms"));
  w.queues = StringsOf(o.if_contains("queues"));
  if (const json::value* at = o.if_contains("created_at_ms"); at && at->is_int64()) {
    w.created_at_ms = at->get_int64();
  }
  if (const json::value* secrets = o.if_contains("secrets"); secrets && secrets->is_array()) {
    for (const json::value& item : secrets->get_array()) {
      const json::object* so = item.if_object();
      if (so == nullptr || !so->contains("secret") || !so->at("secret").is_string()) continue;
      WebhookSecret s;
      s.secret = std::string(so->at("secret").get_string());
      if (auto* c = so->if_contains("created_at_ms"); c && c->is_int64()) {
        s.created_at_ms = c->get_int64();
      }
      if (auto* e = so->if_contains("expires_at_ms"); e && e->is_int64()) {
        s.expires_at_ms = e->get_int64();
      }
      w.secrets.push_back(std::move(s));
    }
  }
  if (const json::value* at = o.if_contains("disabled_at_ms"); at && at->is_int64()) {
    w.disabled_at_ms = at->get_int64();
    if (auto* why = o.if_contains("disabled_reason"); why && why->is_string()) {
      w.disabled_reason = std::string(why->get_string());
    }
  }
  return w;
}

json::object WebhookJson(const Webhook& w) {
  json::object o{{"name", w.name},
                 {"url", w.url},
                 {"types", Strings(w.filter.types)},
                 {"rooms", Strings(w.filter.rooms)},
                 {"queues", Strings(w.queues)}};
  PutWireTime(o, "created_at", w.created_at_ms);
  json::array secrets;
  for (const WebhookSecret& s : w.secrets) {
    json::object so;
    PutWireTime(so, "created_at", s.created_at_ms);
    PutWireTime(so, "expires_at", s.expires_at_ms);
    secrets.push_back(std::move(so));
  }
  o["secrets"] = std::move(secrets);
  PutWireTime(o, "disabled_at", w.disabled_at_ms);
  o["disabled_reason"] = w.disabled_at_ms ? json::value(w.disabled_reason) : json::value(nullptr);
  o["queue"] = WebhookQueue(w.name);
  return o;
}

}  // namespace anteroom::server
