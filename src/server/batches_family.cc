// Batches of jobs over HTTP (queue scope): make one with its callbacks, seal it, read it. Jobs
// join a batch at push ("batch": id, queues_family.cc); the rules (when a batch settles, which
// callbacks are pushed, each once) are the core's (core/queue_types.h BatchSpec).
#include <boost/json.hpp>

#include "common/names.h"
#include "common/random_id.h"
#include "common/wire_errors.h"
#include "http/json_body.h"
#include "server/families.h"
#include "server/preamble.h"
#include "server/schedule_json.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

// A batch's callback payload may be as large as a pushed job's; three of them.
constexpr size_t kBatchBody = 3 * kMaxSchedulePayloadBytes + kDefaultBodyLimit;

json::object BatchJson(const core::BatchView& v) {
  json::object o{{"id", v.id},
                 {"sealed", v.sealed},
                 {"settled", v.settled},
                 {"pending", v.pending},
                 {"acked", v.acked},
                 {"dead", v.dead},
                 {"cancelled", v.cancelled},
                 {"created_at_ms", v.created_ms}};
  if (v.settled) o["settled_at_ms"] = v.settled_ms;
  json::object pushed;
  if (v.on_success_job) pushed["on_success"] = std::to_string(v.on_success_job);
  if (v.on_complete_job) pushed["on_complete"] = std::to_string(v.on_complete_job);
  if (v.on_dead_job) pushed["on_dead"] = std::to_string(v.on_dead_job);
  o["callbacks_pushed"] = std::move(pushed);
  return o;
}

auto AnswerBatch(Respond respond, int status = 200) {
  return [respond = std::move(respond), status](OpResult<core::BatchView> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    Response res = JsonReply(BatchJson(*r));
    res.status = status;
    respond(std::move(res));
  };
}

// body[key]: absent, or a job to push when the batch gets there.
OpResult<std::optional<core::JobSpec>> ReadCallback(const json::object& body, std::string_view raw,
                                                    std::string_view key) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr || v->is_null()) return std::optional<core::JobSpec>();
  auto job = ReadJobTemplate(body, raw, key, wire::kBatchCallbackFields, wire::kBatchCallbackShape);
  if (!job.ok()) return {job.status(), job.message()};
  core::JobSpec spec;
  spec.payload = std::move(job->payload);
  spec.priority = job->priority;
  spec.max_attempts = job->max_attempts;
  spec.group = std::move(job->group);
  return std::optional<core::JobSpec>(std::move(spec));
}

// POST /v1/queues/{q}/batches: {"id"?, "on_success"?, "on_complete"?, "on_dead"?}; 201 with the
// batch (a random id when none is given).
void CmdCreateBatch(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {wire::kQueueNames}, BodyRule::kEmptyIsEmpty);
  if (!in.ok()) return respond(in.Error());
  const json::object& body = in.body();
  for (const auto& field : body) {
    if (field.key() != "id" && field.key() != "on_success" && field.key() != "on_complete" &&
        field.key() != "on_dead") {
      return respond(ErrorReply(OpStatus::kInvalidArgument,
                                wire::UnknownField(field.key(), wire::kBatchFields)));
    }
  }
  auto id = ReadName(body, "id");
  if (!id.ok()) return respond(ErrorReply(id));
  core::BatchSpec spec;
  for (auto [key, slot] :
       {std::pair{"on_success", &spec.on_success}, std::pair{"on_complete", &spec.on_complete},
        std::pair{"on_dead", &spec.on_dead}}) {
    auto callback = ReadCallback(body, req.body, key);
    if (!callback.ok()) return respond(ErrorReply(callback));
    *slot = std::move(*callback);
  }
  s.backend.CreateBatch(req.params[0], id->value_or(NewRandomId()), std::move(spec),
                        AnswerBatch(std::move(respond), 201));
}

// POST /v1/queues/{q}/batches/{id}/seal: no job joins it after; it settles once none is pending.
void CmdSealBatch(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames, wire::kBatchIds})) {
    return respond(std::move(*bad));
  }
  s.backend.SealBatch(req.params[0], req.params[1], AnswerBatch(std::move(respond)));
}

// GET /v1/queues/{q}/batches/{id}: its counts and the callbacks pushed.
void CmdGetBatch(Services& s, const Request& req, Respond respond) {
  if (auto bad = BadNames(req, {wire::kQueueNames, wire::kBatchIds})) {
    return respond(std::move(*bad));
  }
  s.backend.GetBatch(req.params[0], req.params[1], AnswerBatch(std::move(respond)));
}

}  // namespace

// --- The route table ----------------------------------------------------------------------------

void RegisterBatchRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::post, "/v1/queues/{q}/batches", kQueue, kBatchBody, kNoCors, kPlain, CmdCreateBatch},
      {verb::get, "/v1/queues/{q}/batches/{id}", kQueue, kDefaultBodyLimit, kNoCors, kPlain,
       CmdGetBatch},
      {verb::post, "/v1/queues/{q}/batches/{id}/seal", kQueue, kDefaultBodyLimit, kNoCors, kPlain,
       CmdSealBatch},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
