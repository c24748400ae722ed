// Lifecycle events for the business (store/lifecycle_event.h): the admin event stream, a
// Server-Sent Events stream any process serves, resumable with Last-Event-ID.
#include <algorithm>

#include "common/names.h"
#include "common/wire_errors.h"
#include "core/room_notice.h"
#include "server/event_feed.h"
#include "server/families.h"
#include "server/preamble.h"

namespace anteroom::server {

namespace {

constexpr size_t kMaxFilterRooms = 100;

// The comma-separated values of a query parameter (empty: none given). False when one is empty.
bool SplitList(const std::string* text, std::vector<std::string>& out) {
  if (text == nullptr) return true;
  size_t start = 0;
  while (start <= text->size()) {
    size_t comma = std::min(text->find(',', start), text->size());
    if (comma == start) return false;
    out.emplace_back(*text, start, comma - start);
    start = comma + 1;
  }
  return true;
}

bool KnownType(const std::string& type) { return store::IsEventType(type); }

// GET /v1/admin/events?types=...&rooms=... (admin): the events after Last-Event-ID (or `after`;
// without either, from now on), then each as it comes; `event: reset` first when some after the
// position asked for are no longer kept.
void CmdAdminEvents(Services& s, const Request& req, Respond respond) {
  if (s.events == nullptr) {
    return respond(ErrorReply(OpStatus::kUnavailable, std::string(wire::kEventsNotOnCluster)));
  }
  if (req.websocket) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kNotEventStream));
  EventFilter filter;
  if (!SplitList(req.Query("types"), filter.types) ||
      !std::all_of(filter.types.begin(), filter.types.end(), KnownType)) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kEventTypes));
  }
  if (!SplitList(req.Query("rooms"), filter.rooms) || filter.rooms.size() > kMaxFilterRooms ||
      !std::all_of(filter.rooms.begin(), filter.rooms.end(),
                   [](const std::string& r) { return IsValidName(r); })) {
    return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kEventRooms));
  }
  std::optional<store::EventId> after;
  std::string position;
  if (auto it = req.fields.find("Last-Event-ID"); it != req.fields.end()) {
    position = std::string(it->value());
  } else if (const std::string* q = req.Query("after")) {
    position = *q;
  }
  if (!position.empty()) {
    after = store::EventId::Parse(position);
    if (!after) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kLastEventId));
  }
  // A backend that keeps no events says so now, as an answer, not as a stream that stays quiet.
  s.backend.ReadEvents(after, 0,
                       [&s, after, filter = std::move(filter),
                        respond = std::move(respond)](OpResult<store::EventRead> r) mutable {
                         if (!r.ok()) return respond(ErrorReply(r));
                         Response upgrade;
                         upgrade.stream = [&s, after, filter = std::move(filter)](
                                              std::shared_ptr<http::LiveStream> stream) mutable {
                           s.events->Attach(std::move(stream), after, std::move(filter));
                         };
                         respond(std::move(upgrade));
                       });
}

}  // namespace

void RegisterLifecycleRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/v1/admin/events", kAdmin, kDefaultBodyLimit, kNoCors, kStream, CmdAdminEvents},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
