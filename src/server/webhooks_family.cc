// Webhooks over HTTP (admin scope): set, list, read, delete, rotate the secret, enable again.
// A webhook is a config entry (server/webhook_settings.h); the dispatcher (webhook_dispatcher.h)
// turns the lifecycle events it wants into jobs of its queue, and the delivery worker
// (webhook_worker.h) sends them. Its secret is in the answer that makes it (or rotates it) only.
#include <boost/json.hpp>

#include "common/wire_errors.h"
#include "http/json_body.h"
#include "server/event_json.h"
#include "server/families.h"
#include "server/preamble.h"
#include "server/webhook_dispatcher.h"
#include "server/webhook_settings.h"
#include "webhook/signature.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

using Webhooks = std::vector<Webhook>;

// Every webhook the backend keeps (entries this build cannot read are left out).
void LoadWebhooks(Services& s, std::function<void(OpResult<Webhooks>)> done) {
  s.backend.ListConfig(std::string(kWebhookKind),
                       [done = std::move(done)](OpResult<std::vector<store::ConfigEntry>> r) {
                         if (!r.ok()) return done({r.status(), r.message()});
                         Webhooks out;
                         for (const store::ConfigEntry& e : *r) {
                           if (auto w = LoadWebhook(e)) out.push_back(std::move(*w));
                         }
                         done(std::move(out));
                       });
}

const Webhook* Find(const Webhooks& all, const std::string& name) {
  for (const Webhook& w : all) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

std::optional<Response> BadWebhookName(const Request& req) {
  if (auto bad = BadNames(req, {wire::kWebhookNames})) return bad;
  if (!IsValidWebhookName(req.params[0])) {
    return ErrorReply(OpStatus::kInvalidArgument, std::string(wire::kWebhookNameLength));
  }
  return std::nullopt;
}

// Writes `w` and answers it (with `secret` when one was just made), with `status`.
void Save(Services& s, Webhook w, std::optional<std::string> secret, unsigned status,
          Respond respond) {
  store::ConfigEntry entry{std::string(kWebhookKind), w.name, StoreWebhook(w)};
  s.backend.PutConfig(std::move(entry), [&s, w = std::move(w), secret = std::move(secret), status,
                                         respond = std::move(respond)](OpResult<Done> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    if (s.webhooks != nullptr) s.webhooks->Reload();
    json::object o = WebhookJson(w);
    if (secret) o["secret"] = *secret;
    respond(JsonReply(std::move(o), status));
  });
}

// PUT /v1/webhooks/{name}: makes one (201, with its secret) or replaces its url, types, rooms
// and queues (200), keeping its secrets; a disabled one is enabled again.
void CmdPutWebhook(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadWebhookName(req)) return respond(std::move(*bad));
  JsonRequest in(req, {wire::kWebhookNames}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto put = ReadWebhookPut(in.body());
  if (!put.ok()) return respond(ErrorReply(put));
  LoadWebhooks(s, [&s, name = req.params[0], put = std::move(*put),
                   respond = std::move(respond)](OpResult<Webhooks> all) mutable {
    if (!all.ok()) return respond(ErrorReply(all));
    Webhook w = std::move(put);
    w.name = name;
    int64_t now = s.clock.NowMs();
    if (const Webhook* old = Find(*all, name)) {
      w.created_at_ms = old->created_at_ms;
      w.secrets = old->secrets;
      return Save(s, std::move(w), std::nullopt, 200, std::move(respond));
    }
    if (all->size() >= kMaxWebhooks) {
      return respond(ErrorReply(OpStatus::kLimitReached, std::string(wire::kTooManyWebhooks)));
    }
    std::string secret = webhook::NewWebhookSecret();
    w.created_at_ms = now;
    w.secrets.push_back({secret, now, std::nullopt});
    Save(s, std::move(w), std::move(secret), 201, std::move(respond));
  });
}

// GET /v1/webhooks
void CmdListWebhooks(Services& s, const Request&, Respond respond) {
  LoadWebhooks(s, [respond = std::move(respond)](OpResult<Webhooks> all) {
    if (!all.ok()) return respond(ErrorReply(all));
    json::array out;
    for (const Webhook& w : *all) out.push_back(WebhookJson(w));
    respond(JsonReply(json::object{{"webhooks", std::move(out)}}));
  });
}

// GET /v1/webhooks/{name}
void CmdGetWebhook(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadWebhookName(req)) return respond(std::move(*bad));
  LoadWebhooks(s, [name = req.params[0], respond = std::move(respond)](OpResult<Webhooks> all) {
    if (!all.ok()) return respond(ErrorReply(all));
    const Webhook* w = Find(*all, name);
    if (w == nullptr)
      return respond(ErrorReply(OpStatus::kUnknownWebhook, wire::UnknownWebhook(name)));
    respond(JsonReply(WebhookJson(*w)));
  });
}

// DELETE /v1/webhooks/{name}: deliveries still queued for it stay in its queue until deleted.
void CmdDeleteWebhook(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadWebhookName(req)) return respond(std::move(*bad));
  s.backend.DeleteConfig(
      std::string(kWebhookKind), req.params[0],
      [&s, name = req.params[0], respond = std::move(respond)](OpResult<bool> r) {
        if (!r.ok()) return respond(ErrorReply(r));
        if (s.webhooks != nullptr) s.webhooks->Reload();
        if (!*r) {
          return respond(ErrorReply(OpStatus::kUnknownWebhook, wire::UnknownWebhook(name)));
        }
        respond(JsonReply(json::object{{"deleted", name}}));
      });
}

// Loads the webhook the path names and hands a copy to `change`, which saves it or answers;
// 404 unknown_webhook when there is none.
template <typename Change>
void ChangeWebhook(Services& s, const Request& req, Respond respond, Change change) {
  if (auto bad = BadWebhookName(req)) return respond(std::move(*bad));
  LoadWebhooks(s, [name = req.params[0], respond = std::move(respond),
                   change = std::move(change)](OpResult<Webhooks> all) mutable {
    if (!all.ok()) return respond(ErrorReply(all));
    const Webhook* old = Find(*all, name);
    if (old == nullptr) {
      return respond(ErrorReply(OpStatus::kUnknownWebhook, wire::UnknownWebhook(name)));
    }
    change(Webhook(*old), std::move(respond));
  });
}

// POST /v1/webhooks/{name}/rotate: a new secret (in this answer only) signs from now on; the
// ones before it still sign for kSecretOverlapMs, so receivers can move over.
void CmdRotateWebhookSecret(Services& s, const Request& req, Respond respond) {
  ChangeWebhook(s, req, std::move(respond), [&s](Webhook w, Respond respond) {
    int64_t now = s.clock.NowMs();
    std::erase_if(w.secrets, [now](const WebhookSecret& k) {
      return k.expires_at_ms && *k.expires_at_ms <= now;
    });
    for (WebhookSecret& k : w.secrets) {
      if (!k.expires_at_ms || *k.expires_at_ms > now + kSecretOverlapMs) {
        k.expires_at_ms = now + kSecretOverlapMs;
      }
    }
    std::string secret = webhook::NewWebhookSecret();
    w.secrets.insert(w.secrets.begin(), {secret, now, std::nullopt});
    Save(s, std::move(w), std::move(secret), 200, std::move(respond));
  });
}

// POST /v1/webhooks/{name}/enable: after a receiver answered 410 Gone (which disables it).
void CmdEnableWebhook(Services& s, const Request& req, Respond respond) {
  ChangeWebhook(s, req, std::move(respond), [&s](Webhook w, Respond respond) {
    w.disabled_at_ms.reset();
    w.disabled_reason.clear();
    Save(s, std::move(w), std::nullopt, 200, std::move(respond));
  });
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterWebhookRoutes(Router& router, Services& s) {
  using namespace route_table;
  constexpr size_t kBody = kDefaultBodyLimit;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/v1/webhooks", kAdmin, kBody, kNoCors, kPlain, CmdListWebhooks},
      {verb::put, "/v1/webhooks/{name}", kAdmin, kBody, kNoCors, kPlain, CmdPutWebhook},
      {verb::get, "/v1/webhooks/{name}", kAdmin, kBody, kNoCors, kPlain, CmdGetWebhook},
      {verb::delete_, "/v1/webhooks/{name}", kAdmin, kBody, kNoCors, kPlain, CmdDeleteWebhook},
      {verb::post, "/v1/webhooks/{name}/rotate", kAdmin, kBody, kNoCors, kPlain,
       CmdRotateWebhookSecret},
      {verb::post, "/v1/webhooks/{name}/enable", kAdmin, kBody, kNoCors, kPlain, CmdEnableWebhook},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
