// Monitoring: GET /metrics (Prometheus text format 0.0.4: rooms, queues, job and fsync
// latency, HTTP latency, the build) and
// GET /v1/stats/history (the last hour of samples, for the dashboard). Both are admin
// routes: when an admin key is set, a scraper sends it as a Bearer token or Basic password.
#include <fmt/format.h>
#include <boost/json.hpp>

#include <charconv>
#include <functional>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "common/histogram.h"
#include "common/names.h"
#include "common/wire_errors.h"
#include "http/prometheus_text.h"
#include "server/families.h"
#include "server/stats_history.h"

namespace anteroom::server {

namespace {

using http::AppendFamilyHeader;
using http::AppendSample;
using http::EscapeLabelValue;
using http::FormatSampleValue;
using http::kPrometheusContentType;

using QueueList = std::vector<std::pair<std::string, core::QueueStats>>;

// One family per field: a header, then a sample per room or queue.
template <typename Item>
struct Family {
  std::string_view name;
  std::string_view type;
  std::string_view help;
  std::function<int64_t(const Item&)> value;
};

template <typename Item, typename NameOf>
void AppendFamilies(std::string& out, std::string_view label,
                    const std::vector<Family<Item>>& families, const std::vector<Item>& items,
                    NameOf name_of) {
  for (const Family<Item>& family : families) {
    AppendFamilyHeader(out, family.name, family.type, family.help);
    for (const Item& item : items) {
      AppendSample(out, family.name, label, name_of(item), family.value(item));
    }
  }
}

void AppendRooms(std::string& out, const std::vector<core::RoomInfo>& rooms) {
  using R = core::RoomInfo;
  static const std::vector<Family<R>> kFamilies = {
      {"anteroom_room_active", "gauge", "Sessions holding a slot (active or in grace).",
       [](const R& r) { return r.active; }},
      {"anteroom_room_waiting", "gauge", "Sessions waiting in line.",
       [](const R& r) { return r.waiting; }},
      {"anteroom_room_capacity", "gauge", "Slots of the room.",
       [](const R& r) { return r.config.capacity; }},
      {"anteroom_room_admitted_total", "counter", "Sessions let in from the line.",
       [](const R& r) { return r.counters.admitted_total; }},
      {"anteroom_room_dropped_total", "counter",
       "Waiting sessions that stopped checking in, and admissions never claimed.",
       [](const R& r) { return r.counters.dropped_total; }},
      {"anteroom_room_released_total", "counter",
       "Slots freed: final leaves, grace over, evictions, unclaimed admissions.",
       [](const R& r) { return r.counters.released_total; }},
  };
  AppendFamilies(out, "room", kFamilies, rooms,
                 [](const R& r) -> std::string_view { return r.room; });
}

void AppendQueues(std::string& out, const QueueList& queues) {
  using Q = QueueList::value_type;
  static const std::vector<Family<Q>> kFamilies = {
      {"anteroom_queue_ready", "gauge", "Jobs ready to be fetched.",
       [](const Q& q) { return q.second.ready; }},
      {"anteroom_queue_inflight", "gauge", "Jobs leased to workers.",
       [](const Q& q) { return q.second.inflight; }},
      {"anteroom_queue_delayed", "gauge", "Jobs waiting for their delay or retry backoff.",
       [](const Q& q) { return q.second.delayed; }},
      {"anteroom_queue_dead", "gauge", "Dead-lettered jobs.",
       [](const Q& q) { return q.second.dead; }},
      {"anteroom_queue_pushed_total", "counter", "Jobs pushed.",
       [](const Q& q) { return q.second.pushed; }},
      {"anteroom_queue_acked_total", "counter", "Jobs acknowledged as done.",
       [](const Q& q) { return q.second.acked; }},
      {"anteroom_queue_nacked_total", "counter", "Jobs handed back by workers as failed.",
       [](const Q& q) { return q.second.nacked; }},
      {"anteroom_queue_expired_total", "counter", "Leases that ran out before an ack.",
       [](const Q& q) { return q.second.expired; }},
  };
  AppendFamilies(out, "queue", kFamilies, queues,
                 [](const Q& q) -> std::string_view { return q.first; });
}

// A process-wide histogram (no labels: a queue or room name would make its series unbounded).
void AppendHistogram(std::string& out, std::string_view name, std::string_view help,
                     const Histogram& h) {
  AppendFamilyHeader(out, name, "histogram", help);
  Histogram::Totals totals = h.Read();
  auto it = std::back_inserter(out);
  for (size_t b = 0; b < totals.cumulative.size(); ++b) {
    std::string le = b < h.bounds().size() ? FormatSampleValue(h.bounds()[b]) : "+Inf";
    fmt::format_to(it, "{}_bucket{{le=\"{}\"}} {}\n", name, le, totals.cumulative[b]);
  }
  fmt::format_to(it, "{}_sum {}\n", name, FormatSampleValue(totals.sum_seconds));
  fmt::format_to(it, "{}_count {}\n", name, totals.count);
}

// What the engine measured of itself (common/histogram.h's EngineMetrics), and the build.
void AppendEngine(std::string& out) {
  const EngineMetrics& m = ProcessEngineMetrics();
  AppendHistogram(out, "anteroom_job_wait_seconds",
                  "Time jobs fetched by this process had waited ready (ready -> fetched), every "
                  "queue together.",
                  m.job_wait);
  AppendHistogram(out, "anteroom_job_run_seconds",
                  "Time from a job's fetch to its ack, for acks taken by this process, every "
                  "queue together.",
                  m.job_run);
  AppendHistogram(out, "anteroom_room_wait_seconds",
                  "Time sessions admitted by this process had waited in line (joined -> "
                  "admitted; 0 for one let in at once), every room together.",
                  m.room_wait);
  AppendHistogram(out, "anteroom_log_fsync_seconds",
                  "Duration of each fdatasync of the embedded backend's data directory (log "
                  "segments, snapshots); none with the Redis backend.",
                  m.log_fsync);
  AppendFamilyHeader(out, "anteroom_log_fsync_errors_total", "counter",
                     "fdatasync calls of the data directory that failed (the disk refused a "
                     "write: changes are then refused).");
  AppendSample(out, "anteroom_log_fsync_errors_total", "", "",
               static_cast<int64_t>(m.log_fsync_errors.load(std::memory_order_relaxed)));
  AppendFamilyHeader(out, "anteroom_build_info", "gauge",
                     "Always 1; its labels name the version and the commit built.");
  fmt::format_to(std::back_inserter(out),
                 "anteroom_build_info{{version=\"{}\",revision=\"{}\"}} 1\n",
                 EscapeLabelValue(ANTEROOM_VERSION), EscapeLabelValue(ANTEROOM_REVISION));
}

// Rooms and queues when the backend answered (a backend that is down still lets the HTTP
// histograms out, and says so in anteroom_backend_up).
std::string RenderMetrics(const OpResult<std::vector<core::RoomInfo>>& rooms,
                          const OpResult<QueueList>& queues, const HttpMetrics& http) {
  std::string out;
  out.reserve(16 * 1024);
  AppendFamilyHeader(out, "anteroom_backend_up", "gauge",
                     "1 when the backend answered the listing of rooms and queues for this "
                     "scrape, 0 when it did not (their families are then left out).");
  AppendSample(out, "anteroom_backend_up", "", "", rooms.ok() && queues.ok() ? 1 : 0);
  if (rooms.ok()) AppendRooms(out, *rooms);
  if (queues.ok()) AppendQueues(out, *queues);
  AppendEngine(out);
  http.AppendPrometheus(out);
  http.AppendTlsCertificate(out);
  return out;
}

// GET /metrics: the Prometheus text of rooms, queues and the HTTP latency histograms.
void CmdMetrics(Services& s, const Request&, Respond respond) {
  s.backend.ListRooms(
      [&s, respond = std::move(respond)](OpResult<std::vector<core::RoomInfo>> rooms) mutable {
        s.backend.ListQueues([&s, respond = std::move(respond),
                              rooms = std::move(rooms)](OpResult<QueueList> queues) {
          Response r;
          r.content_type = std::string(kPrometheusContentType);
          r.body = RenderMetrics(rooms, queues, *s.http_metrics);
          respond(std::move(r));
        });
      });
}

// GET /v1/stats/history[?limit=N&room_after=NAME&queue_after=NAME&kinds=rooms,queues]: a page
// of the last hour of samples.
void CmdStatsHistory(Services& s, const Request& req, Respond respond) {
  if (s.stats_history == nullptr) {
    return respond(ErrorReply(OpStatus::kUnavailable, wire::kNoStatsHistory));
  }
  HistoryPage page;
  if (const std::string* l = req.Query("limit")) {
    size_t n = 0;
    auto [end, ec] = std::from_chars(l->data(), l->data() + l->size(), n);
    if (ec != std::errc() || end != l->data() + l->size() || n < 1 || n > HistoryPage::kMaxLimit) {
      return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kHistoryLimit));
    }
    page.limit = n;
  }
  for (auto [key, into] :
       {std::pair{"room_after", &page.room_after}, std::pair{"queue_after", &page.queue_after}}) {
    if (const std::string* after = req.Query(key)) {
      if (!IsValidName(*after)) {
        return respond(ErrorReply(OpStatus::kInvalidArgument, wire::BadNameField(key)));
      }
      *into = *after;
    }
  }
  if (const std::string* kinds = req.Query("kinds")) {
    page.rooms = page.queues = false;
    for (std::string_view rest = *kinds; !rest.empty();) {
      std::string_view kind = rest.substr(0, rest.find(','));
      rest.remove_prefix(std::min(rest.size(), kind.size() + 1));
      if (kind == "rooms") {
        page.rooms = true;
      } else if (kind == "queues") {
        page.queues = true;
      } else {
        return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kHistoryKinds));
      }
    }
  }
  respond(JsonReply(s.stats_history->ToJson(s.clock.NowMs(), page)));
}

}  // namespace

void RegisterMetricsRoutes(Router& router, Services& s) {
  s.http_metrics = &router.http_metrics();
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/metrics", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdMetrics},
      {verb::get, "/v1/stats/history", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdStatsHistory},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
