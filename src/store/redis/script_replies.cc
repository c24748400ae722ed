#include "store/redis/script_replies.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "store/backend.h"

namespace anteroom::store::redis {

namespace {

// queue.lua's flow.RAN: outcomes from it up are acks that finished their job.
constexpr int64_t kRanBase = 3;

// Where an operation's own fields start: after the status word and the register, and for a
// queue the wake flag.
const Reply& RoomPayload(const Reply& answer) { return answer.at(2); }
const Reply& QueuePayload(const Reply& answer) { return answer.at(3); }

std::optional<int64_t> OffWhenNegative(int64_t v) {
  return v >= 0 ? std::optional<int64_t>(v) : std::nullopt;
}

// A queueing method by its name (room.lua stores and answers core::ToString's names); fifo for
// a name it does not know.
core::QueueingMethod MethodOf(const Reply& name) {
  return core::ParseQueueingMethod(name.str).value_or(core::QueueingMethod::kFifo);
}

// queue.lua's lease outcomes: OK, LOST, INVALID, or flow.RAN + ms for an ack that finished
// its job (OK, and how long the delivery ran: observed here, as every ack's answer, whether
// of an ack or of a fetch, is read here once).
core::LeaseOutcome ToLeaseOutcome(int64_t code) {
  if (code >= kRanBase) {
    ObserveRan(code - kRanBase);
    return core::LeaseOutcome::kOk;
  }
  return code == 0   ? core::LeaseOutcome::kOk
         : code == 1 ? core::LeaseOutcome::kLeaseLost
                     : core::LeaseOutcome::kInvalidLease;
}

// The first `n` outcomes of `codes` (one missing reads as 0, OK).
std::vector<core::LeaseOutcome> Outcomes(const Reply& codes, size_t n) {
  std::vector<core::LeaseOutcome> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(ToLeaseOutcome(codes.at(i).AsInt()));
  return out;
}

}  // namespace

// ---- every answer --------------------------------------------------------------------------

ScriptStatus ParseStatus(const Reply& answer) {
  ScriptStatus s;
  s.word = answer.at(0).str;
  if (s.word == "invalid_argument") {
    s.message = answer.at(1).str;
  } else if (s.word == "rate_limited") {
    s.retry_after_ms = answer.at(2).AsInt();
    s.message = answer.at(3).str;
  } else if (s.word == "challenge_required" || s.word == "invalid" || s.word == "conflict" ||
             s.word == "not_found" || s.word == "limit_reached") {
    s.message = answer.at(2).str;
  }
  return s;
}

ScriptEffects ParseEffects(const Reply& answer, bool queue) {
  ScriptEffects e;
  if (answer.type != Reply::Type::kArray || answer.elements.size() < 2) return e;
  const Reply& both = answer.at(1);
  const Reply& reg = both.type == Reply::Type::kArray ? both.at(0) : both;
  if (reg.type == Reply::Type::kInteger && reg.integer >= 0) e.register_deadline = reg.integer;
  if (!queue && both.type == Reply::Type::kArray) {
    for (size_t i = 1; i < both.elements.size(); ++i) {
      e.room_waits_ms.push_back(both.elements[i].AsInt());
    }
  }
  e.wake = queue && answer.at(0).str == "ok" && answer.at(2).AsInt() == 1;
  return e;
}

int64_t ParseNextDeadline(const Reply& answer) {
  const Reply& reg = answer.at(1);
  return (reg.type == Reply::Type::kArray ? reg.at(0) : reg).AsInt();
}

// {} or {event, shuffled (0/1), people, published, seed}
std::optional<DrawState> ParseDrawState(const Reply& answer) {
  const Reply& d = RoomPayload(answer);
  if (d.type != Reply::Type::kArray || d.elements.size() < 5) return std::nullopt;
  return DrawState{.event = d.at(0).str,
                   .shuffled = d.at(1).AsInt() == 1,
                   .people = static_cast<uint64_t>(std::max<int64_t>(0, d.at(2).AsInt())),
                   .published = static_cast<uint64_t>(std::max<int64_t>(0, d.at(3).AsInt())),
                   .seed = d.at(4).str};
}

// ---- room.lua ------------------------------------------------------------------------------

// {cap, grace, cto, idle, apm, holders, waiting, admitted, dropped, released, paused, url, jpm,
// ppc, pow, queueing method, gate (nil: none), page settings (nil: none), then, while an event is
// open or a draw is published, in force: cap, grace, cto, apm, queueing method, pre-queue open
// (0/1), prequeued, open event (nil: none)}. Without these the room's own settings are in force,
// nobody is pre-queued and no event is open.
core::RoomInfo ParseRoomInfo(const std::string& room, const Reply& answer) {
  const Reply& a = RoomPayload(answer);
  core::RoomInfo info;
  info.room = room;
  info.config.capacity = a.at(0).AsInt();
  info.config.grace_ms = a.at(1).AsInt();
  info.config.checkin_timeout_ms = a.at(2).AsInt();
  info.config.idle_timeout_ms = OffWhenNegative(a.at(3).AsInt());
  if (int64_t apm = a.at(4).AsInt(); apm >= 0) info.config.admit_per_minute = apm;
  info.active = a.at(5).AsInt();
  info.waiting = a.at(6).AsInt();
  info.counters.admitted_total = a.at(7).AsInt();
  info.counters.dropped_total = a.at(8).AsInt();
  info.counters.released_total = a.at(9).AsInt();
  info.config.paused = a.at(10).AsInt() == 1;
  if (const std::string& url = a.at(11).str; !url.empty()) info.config.target_url = url;
  info.config.joins_per_minute_per_client = OffWhenNegative(a.at(12).AsInt());
  info.config.places_per_client = OffWhenNegative(a.at(13).AsInt());
  info.config.challenge_difficulty = OffWhenNegative(a.at(14).AsInt());
  info.config.queueing_method = MethodOf(a.at(15));
  if (const Reply& gate = a.at(16); gate.type == Reply::Type::kString) info.config.gate = gate.str;
  if (const Reply& page = a.at(17); page.type == Reply::Type::kString) info.config.page = page.str;
  info.config.notify_at_position = OffWhenNegative(a.at(18).AsInt());
  info.effective = info.config;
  bool prequeue_open = false;
  if (a.elements.size() > 19) {
    // An event overrides these five; the rest in force are the room's own (core EffectiveConfig).
    info.effective.capacity = a.at(19).AsInt();
    info.effective.grace_ms = a.at(20).AsInt();
    info.effective.checkin_timeout_ms = a.at(21).AsInt();
    info.effective.admit_per_minute = OffWhenNegative(a.at(22).AsInt());
    info.effective.queueing_method = MethodOf(a.at(23));
    prequeue_open = a.at(24).AsInt() == 1;
    info.prequeued = a.at(25).AsInt();
    if (const Reply& event = a.at(26); event.type == Reply::Type::kString) info.event = event.str;
  }
  // As core::Room::Phase: of the settings in force (an event's method, capacity).
  info.phase = core::PhaseOf(info.effective.queueing_method, prequeue_open, info.waiting,
                             info.active, info.effective.capacity, info.config.paused);
  return info;
}

core::FlowHistory ParseFlowHistory(std::string_view text) {
  core::FlowHistory h;
  auto number = [&](size_t& at, int64_t& out) {
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data() + at, end, out);
    if (ec != std::errc() || p == text.data() + at) return false;
    at = static_cast<size_t>(p - text.data());
    return true;
  };
  size_t at = 0;
  int64_t start = 0;
  if (!number(at, start) || at >= text.size() || text[at] != '|') return h;
  ++at;
  // Ascending buckets: read them all, then place each from the newest back.
  std::vector<std::pair<int64_t, int64_t>> buckets;
  while (at < text.size()) {
    int64_t b = 0, c = 0;
    if (!number(at, b) || at >= text.size() || text[at] != ':') return {};
    ++at;
    if (!number(at, c) || c < 0) return {};
    if (!buckets.empty() && b <= buckets.back().first) return {};
    buckets.emplace_back(b, c);
    if (at < text.size()) {
      if (text[at] != ',') return {};
      ++at;
    }
  }
  if (buckets.empty()) return h;
  h.start_ms = start;
  h.newest = buckets.back().first;
  for (const auto& [b, c] : buckets) {
    if (h.newest - b < core::FlowHistory::kBuckets) h.counts[static_cast<size_t>(h.newest - b)] = c;
  }
  return h;
}

namespace {
// What room.lua context() answers beside the views of one call:
// {now, method, pre-queue open (0/1), paused, outflow, apm, cto, idle, starts_at, ends_at,
// inflow} (-1: none, for apm, idle and the event's times; the flows as ParseFlowHistory reads).
struct ViewContext {
  int64_t now = 0;
  core::QueueingMethod method = core::QueueingMethod::kFifo;
  bool prequeue_open = false;
  bool paused = false;
  core::Flow flow;
  std::optional<int64_t> admit_per_minute;
  int64_t checkin_timeout_ms = 0;
  std::optional<int64_t> idle_timeout_ms;
  std::optional<int64_t> event_starts_at, event_ends_at;
};
ViewContext ToContext(const Reply& c) {
  int64_t now = c.at(0).AsInt();
  return ViewContext{.now = now,
                     .method = MethodOf(c.at(1)),
                     .prequeue_open = c.at(2).AsInt() == 1,
                     .paused = c.at(3).AsInt() == 1,
                     .flow = core::EstimateFlow(ParseFlowHistory(c.at(4).str),
                                                ParseFlowHistory(c.at(10).str), now),
                     .admit_per_minute = OffWhenNegative(c.at(5).AsInt()),
                     .checkin_timeout_ms = c.at(6).AsInt(),
                     .idle_timeout_ms = OffWhenNegative(c.at(7).AsInt()),
                     .event_starts_at = OffWhenNegative(c.at(8).AsInt()),
                     .event_ends_at = OffWhenNegative(c.at(9).AsInt())};
}

std::optional<int64_t> MsUntil(const std::optional<int64_t>& at, int64_t now) {
  if (!at || *at <= now) return std::nullopt;
  return *at - now;
}

// {status, position, waiting, active, capacity, admission, incarnation}, finished as
// core::Room::View and AddEventFields finish a view.
core::SessionView ToView(const std::string& session, const Reply& a, const ViewContext& c) {
  core::SessionView v;
  v.session = session;
  const std::string& st = a.at(0).str;
  v.status = st == "waiting"    ? core::SessionStatus::kWaiting
             : st == "active"   ? core::SessionStatus::kActive
             : st == "grace"    ? core::SessionStatus::kGrace
             : st == "prequeue" ? core::SessionStatus::kPrequeue
             : st == "closed"   ? core::SessionStatus::kClosed
                                : core::SessionStatus::kGone;
  v.position = a.at(1).AsInt();
  v.waiting = a.at(2).AsInt();
  v.active = a.at(3).AsInt();
  v.capacity = a.at(4).AsInt();
  v.admission = static_cast<uint64_t>(a.at(5).AsInt());
  v.incarnation = static_cast<uint64_t>(a.at(6).AsInt());
  // Nobody moves while admissions are paused or braked.
  bool moving = !c.paused && c.method != core::QueueingMethod::kQueueAll;
  if (v.status == core::SessionStatus::kWaiting) {
    if (c.method == core::QueueingMethod::kRandom) {
      v.position = 0;
      v.odds = core::RandomOdds(v.waiting, c.flow, c.admit_per_minute, moving);
      if (v.odds) v.eta_ms = v.odds->p50_ms;
    } else if (moving) {
      v.eta_ms = core::EtaMs(v.position, c.flow, c.admit_per_minute);
    }
  } else if (v.status == core::SessionStatus::kActive || v.status == core::SessionStatus::kGrace) {
    v.eta_ms = 0;
  }
  v.phase = core::PhaseOf(c.method, c.prequeue_open, v.waiting, v.active, v.capacity, c.paused);
  v.queueing_method = c.method;
  v.starts_in_ms = MsUntil(c.event_starts_at, c.now);
  v.ends_in_ms = MsUntil(c.event_ends_at, c.now);
  if (v.status == core::SessionStatus::kPrequeue && !v.starts_in_ms) v.starts_in_ms = 0;
  v.refresh_after_ms = core::RefreshAfterMs(v.status, c.checkin_timeout_ms, c.idle_timeout_ms,
                                            v.starts_in_ms, v.eta_ms);
  return v;
}
}  // namespace

core::SessionView ParseSessionView(const std::string& session, const Reply& answer) {
  return ToView(session, RoomPayload(answer), ToContext(answer.at(3)));
}

std::vector<core::SessionView> ParsePresent(const std::vector<std::string>& sessions,
                                            const Reply& answer) {
  const Reply& list = RoomPayload(answer);
  ViewContext context = ToContext(answer.at(3));
  std::vector<core::SessionView> views;
  views.reserve(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    views.push_back(ToView(sessions[i], list.at(i), context));
  }
  return views;
}

// {{ver, holders, waiting, cap, outflow, apm, cto, idle, paused, inc, method, pre-queue open,
// event starts_at, event ends_at, inflow, now}, line}
LineReply ParseLine(Reply&& answer) {
  const Reply& c = RoomPayload(answer);
  LineReply r;
  core::LineView& v = r.counts;
  v.version = static_cast<uint64_t>(c.at(0).AsInt());
  v.active = c.at(1).AsInt();
  v.waiting = c.at(2).AsInt();
  v.capacity = c.at(3).AsInt();
  v.flow = core::EstimateFlow(ParseFlowHistory(c.at(4).str), ParseFlowHistory(c.at(14).str),
                              c.at(15).AsInt());
  if (int64_t apm = c.at(5).AsInt(); apm >= 0) v.admit_per_minute = apm;
  v.checkin_timeout_ms = c.at(6).AsInt();
  if (int64_t idle = c.at(7).AsInt(); idle >= 0) v.idle_timeout_ms = idle;
  v.paused = c.at(8).AsInt() == 1;
  r.incarnation = static_cast<uint64_t>(c.at(9).AsInt());
  v.queueing_method = MethodOf(c.at(10));
  v.phase = core::PhaseOf(v.queueing_method, c.at(11).AsInt() == 1, v.waiting, v.active, v.capacity,
                          v.paused);
  v.event_starts_at = OffWhenNegative(c.at(12).AsInt());
  v.event_ends_at = OffWhenNegative(c.at(13).AsInt());
  if (answer.elements.size() <= 3) return r;
  Reply& line = answer.elements[3];
  if (line.type == Reply::Type::kArray) {
    r.deltas.emplace();
    r.deltas->reserve(line.elements.size());
    for (Reply& e : line.elements) {
      r.deltas->push_back(e.type == Reply::Type::kString ? std::move(e.str) : std::string());
    }
  } else {
    r.snapshot = std::move(line.str);
  }
  return r;
}

namespace {
// {id, name, prequeue_at, starts_at, ends_at, shuffle, scope, suspended, cap, apm, grace, cto,
// method (''), page (nil), stage, seed (nil), count, at}; -1: none
core::RoomEvent ToEvent(const Reply& a) {
  core::RoomEvent e;
  e.id = a.at(0).str;
  core::EventSpec& s = e.spec;
  s.name = a.at(1).str;
  s.prequeue_at = OffWhenNegative(a.at(2).AsInt());
  s.starts_at = a.at(3).AsInt();
  s.ends_at = a.at(4).AsInt();
  s.shuffle_at_start = a.at(5).AsInt() == 1;
  s.prequeue_scope = core::ParsePrequeueScope(a.at(6).str).value_or(core::PrequeueScope::kNew);
  s.suspended = a.at(7).AsInt() == 1;
  core::EventOverrides& o = s.overrides;
  o.capacity = OffWhenNegative(a.at(8).AsInt());
  o.admit_per_minute = OffWhenNegative(a.at(9).AsInt());
  o.grace_ms = OffWhenNegative(a.at(10).AsInt());
  o.checkin_timeout_ms = OffWhenNegative(a.at(11).AsInt());
  if (!a.at(12).str.empty()) o.queueing_method = core::ParseQueueingMethod(a.at(12).str);
  if (const Reply& page = a.at(13); page.type == Reply::Type::kString) o.page = page.str;
  int64_t stage = a.at(14).AsInt();
  e.stage = stage >= 0 && stage <= static_cast<int64_t>(core::EventStage::kEnded)
                ? static_cast<core::EventStage>(stage)
                : core::EventStage::kScheduled;
  if (const Reply& seed = a.at(15); seed.type == Reply::Type::kString) {
    core::ShuffleOutcome shuffle;
    std::copy_n(seed.str.begin(), std::min(seed.str.size(), shuffle.seed.size()),
                shuffle.seed.begin());
    shuffle.count = a.at(16).AsInt();
    shuffle.at = a.at(17).AsInt();
    e.shuffle = shuffle;
  }
  return e;
}
}  // namespace

core::RoomEvent ParseRoomEvent(const Reply& answer) { return ToEvent(RoomPayload(answer)); }

std::vector<core::RoomEvent> ParseEvents(const Reply& answer) {
  std::vector<core::RoomEvent> events;
  for (const Reply& e : RoomPayload(answer).elements) events.push_back(ToEvent(e));
  return events;
}

std::optional<std::string> ParseAdmissionHolder(const Reply& answer) {
  const std::string& id = RoomPayload(answer).str;
  return id.empty() ? std::nullopt : std::optional<std::string>(id);
}

bool ParseIsRevoked(const Reply& answer) { return RoomPayload(answer).AsInt() == 1; }

int64_t ParsePassesAdded(const Reply& answer) { return RoomPayload(answer).AsInt(); }

namespace {
// Two hex digits per byte (room.lua keeps digests so); empty when `hex` is not that.
std::string FromHex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  if (hex.size() % 2 != 0) return out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

int64_t Digits(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() ? v : 0;
}

// room.lua's pass record, "KIND:USES:LEFT:CREATED:EXPIRES:DIGEST" (EXPIRES '' = never).
core::RoomPass ToPass(const std::string& id, std::string_view record) {
  core::RoomPass p;
  p.id = id;
  std::string_view field[6];
  for (size_t k = 0; k < 6; ++k) {
    size_t colon = k < 5 ? record.find(':') : std::string_view::npos;
    field[k] = record.substr(0, colon);
    record = colon == std::string_view::npos ? std::string_view() : record.substr(colon + 1);
  }
  p.kind = core::ParsePassKind(field[0]).value_or(core::PassKind::kAdmit);
  p.uses = Digits(field[1]);
  p.uses_left = Digits(field[2]);
  p.created_at = Digits(field[3]);
  if (!field[4].empty()) p.expires_at = Digits(field[4]);
  p.digest = FromHex(field[5]);
  return p;
}
}  // namespace

std::vector<core::RoomPass> ParsePasses(const Reply& answer) {
  const Reply& flat = RoomPayload(answer);
  std::vector<core::RoomPass> out;
  out.reserve(flat.elements.size() / 2);
  for (size_t i = 0; i + 1 < flat.elements.size(); i += 2) {
    out.push_back(ToPass(flat.elements[i].str, flat.elements[i + 1].str));
  }
  std::sort(out.begin(), out.end(), [](const core::RoomPass& a, const core::RoomPass& b) {
    return a.created_at != b.created_at ? a.created_at < b.created_at : a.id < b.id;
  });
  return out;
}

int64_t ParseRevokedPasses(const Reply& answer) { return RoomPayload(answer).AsInt(); }

// ---- queue.lua -----------------------------------------------------------------------------

// {id, made (1) or a dedupe hit (0), id, made, ...}
std::vector<core::PushResult> ParsePush(const Reply& answer) {
  const Reply& flat = QueuePayload(answer);
  std::vector<core::PushResult> out;
  for (size_t i = 0; i + 1 < flat.elements.size(); i += 2) {
    out.push_back(
        {static_cast<core::JobId>(flat.elements[i].AsInt()), flat.elements[i + 1].AsInt() == 1});
  }
  return out;
}

// {{outcome...}, {{id, payload, attempt, delivery, lease expiry, priority, group, ready since,
// leased at}...}}
FetchReply ParseFetch(const Reply& answer, size_t acks) {
  const Reply& payload = QueuePayload(answer);
  FetchReply r;
  r.acked = Outcomes(payload.at(0), acks);
  r.reclaimed = static_cast<size_t>(payload.at(2).AsInt());
  if (payload.elements.size() > 3) r.retry_in_ms = payload.at(3).AsInt();
  const Reply& jobs = payload.at(1);
  r.jobs.reserve(jobs.elements.size());
  for (const Reply& j : jobs.elements) {
    r.jobs.push_back({.id = static_cast<core::JobId>(j.at(0).AsInt()),
                      .payload = j.at(1).str,
                      .attempt = static_cast<int32_t>(j.at(2).AsInt()),
                      .delivery = static_cast<uint64_t>(j.at(3).AsInt()),
                      .lease_expires_ms = j.at(4).AsInt(),
                      .priority = static_cast<int32_t>(j.at(5).AsInt()),
                      .group = j.at(6).str,
                      .ready_ms = j.elements.size() > 8 ? j.at(7).AsInt() : 0,
                      .leased_ms = j.elements.size() > 8 ? j.at(8).AsInt() : 0});
  }
  return r;
}

// {fairness, per group: rate limit, period, burst, concurrency, queue-wide: the same four,
// keep_acked's count, age_ms}
core::QueueSettings ParseQueueSettings(const Reply& answer) {
  const Reply& a = QueuePayload(answer);
  core::QueueSettings settings;
  core::QueueLimits& limits = settings.limits;
  limits.fairness = a.at(0).AsInt() == 1 ? core::Fairness::kRoundRobin : core::Fairness::kFifo;
  size_t at = 1;
  for (core::JobLimits* l : {&limits.per_group, &limits.queue}) {
    if (int64_t limit = a.at(at).AsInt(); limit > 0) {
      l->rate = core::RateLimit{
          .limit = limit, .period_ms = a.at(at + 1).AsInt(), .burst = a.at(at + 2).AsInt()};
    }
    l->concurrency = a.at(at + 3).AsInt();
    at += 4;
  }
  if (a.elements.size() > 10) {
    settings.keep_acked.count = a.at(9).AsInt();
    settings.keep_acked.age_ms = a.at(10).AsInt();
  }
  return settings;
}

std::vector<core::LeaseOutcome> ParseLeaseOutcomes(const Reply& answer, size_t leases) {
  return Outcomes(QueuePayload(answer), leases);
}

core::LeaseOutcome ParseLeaseOutcome(const Reply& answer) {
  return ToLeaseOutcome(QueuePayload(answer).AsInt());
}

namespace {
// queue.lua's state names, as core::ToString(JobState) spells them; nullopt for another.
std::optional<core::JobState> JobStateOf(std::string_view name) {
  for (core::JobState s :
       {core::JobState::kWaitingDeps, core::JobState::kDelayed, core::JobState::kReady,
        core::JobState::kInflight, core::JobState::kAcked, core::JobState::kDead,
        core::JobState::kCancelled}) {
    if (name == core::ToString(s)) return s;
  }
  return std::nullopt;
}
std::optional<std::string> OptString(const Reply& v) {
  if (v.type != Reply::Type::kString) return std::nullopt;
  return v.str;
}
// A job id the script keeps as the decimal text it was sent (a dependency's: any uint64); 0
// for one that does not read as one.
core::JobId JobIdOf(const Reply& v) {
  if (v.type == Reply::Type::kInteger) return static_cast<core::JobId>(v.integer);
  core::JobId id = 0;
  std::from_chars(v.str.data(), v.str.data() + v.str.size(), id);
  return id;
}
// queue.lua's dependency states, as core::ToString(DependencyState) spells them; missing for
// another.
core::DependencyState DependencyStateOf(std::string_view name) {
  for (core::DependencyState s :
       {core::DependencyState::kPending, core::DependencyState::kAcked,
        core::DependencyState::kDead, core::DependencyState::kCancelled}) {
    if (name == core::ToString(s)) return s;
  }
  return core::DependencyState::kMissing;
}
}  // namespace

// false, or {state, payload, priority, group, attempts, max_attempts, due, finished, {{attempt,
// error, at}...}, progress (nil: none), result (nil: none), {dropped, at, line, at, line...}
// (nil: none), {dependency id (decimal text)...}, waiting_on, batch ('' none)}
std::optional<core::JobView> ParseJobView(core::JobId id, const Reply& answer) {
  const Reply& a = QueuePayload(answer);
  if (a.type != Reply::Type::kArray) return std::nullopt;
  std::optional<core::JobState> state = JobStateOf(a.at(0).str);
  if (!state) return std::nullopt;
  core::JobView v;
  v.id = id;
  v.state = *state;
  v.payload = a.at(1).str;
  v.priority = static_cast<int32_t>(a.at(2).AsInt());
  v.group = a.at(3).str;
  v.attempts = static_cast<int32_t>(a.at(4).AsInt());
  v.max_attempts = static_cast<int32_t>(a.at(5).AsInt());
  v.due_ms = a.at(6).AsInt();
  v.finished_ms = a.at(7).AsInt();
  for (const Reply& h : a.at(8).elements) {
    v.history.push_back({static_cast<int32_t>(h.at(0).AsInt()), h.at(1).str, h.at(2).AsInt()});
  }
  v.progress = OptString(a.at(9));
  v.result = OptString(a.at(10));
  const Reply& log = a.at(11);
  if (log.type == Reply::Type::kArray && !log.elements.empty()) {
    v.log_dropped = log.at(0).AsInt();
    v.log.reserve(log.elements.size() / 2);
    for (size_t k = 1; k + 1 < log.elements.size(); k += 2) {
      v.log.push_back({log.elements[k].AsInt(), log.elements[k + 1].str});
    }
  }
  for (const Reply& d : a.at(12).elements) v.depends_on.push_back(JobIdOf(d));
  v.waiting_on = static_cast<int32_t>(a.at(13).AsInt());
  v.batch = a.at(14).str;
  return v;
}

// false, or {id (decimal text), state, result (nil: none), ...} flat
std::optional<std::vector<core::DependencyView>> ParseDependencies(const Reply& answer) {
  const Reply& a = QueuePayload(answer);
  if (a.type != Reply::Type::kArray) return std::nullopt;
  std::vector<core::DependencyView> out;
  out.reserve(a.elements.size() / 3);
  for (size_t k = 0; k + 2 < a.elements.size(); k += 3) {
    out.push_back({JobIdOf(a.elements[k]), DependencyStateOf(a.elements[k + 1].str),
                   OptString(a.elements[k + 2])});
  }
  return out;
}

// false, or {id, sealed, settled, pending, acked, dead, cancelled, created, settled_at,
// on_success job, on_complete job, on_dead job}
std::optional<core::BatchView> ParseBatchView(const Reply& answer) {
  const Reply& a = QueuePayload(answer);
  if (a.type != Reply::Type::kArray) return std::nullopt;
  auto job = [&](size_t k) {
    return static_cast<core::JobId>(std::max<int64_t>(0, a.at(k).AsInt()));
  };
  return core::BatchView{.id = a.at(0).str,
                         .sealed = a.at(1).AsInt() == 1,
                         .settled = a.at(2).AsInt() == 1,
                         .pending = a.at(3).AsInt(),
                         .acked = a.at(4).AsInt(),
                         .dead = a.at(5).AsInt(),
                         .cancelled = a.at(6).AsInt(),
                         .created_ms = a.at(7).AsInt(),
                         .settled_ms = a.at(8).AsInt(),
                         .on_success_job = job(9),
                         .on_complete_job = job(10),
                         .on_dead_job = job(11)};
}

size_t ParseJobCount(const Reply& answer) {
  return static_cast<size_t>(QueuePayload(answer).AsInt());
}

// {ready, delayed, inflight, dead, pushed, acked, nacked, expired, cancelled, workers, paused,
// counted, waiting}
StatsReply ParseStats(const Reply& answer) {
  const Reply& a = QueuePayload(answer);
  StatsReply r;
  core::QueueStats& s = r.stats;
  s.ready = a.at(0).AsInt();
  s.delayed = a.at(1).AsInt();
  s.inflight = a.at(2).AsInt();
  s.dead = a.at(3).AsInt();
  s.pushed = a.at(4).AsInt();
  s.acked = a.at(5).AsInt();
  s.nacked = a.at(6).AsInt();
  s.expired = a.at(7).AsInt();
  s.cancelled = a.at(8).AsInt();
  s.workers = a.at(9).AsInt();
  s.paused = a.at(10).AsInt() != 0;
  r.counted = a.at(11).AsInt() == 1;
  s.waiting = a.at(12).AsInt();
  return r;
}

// {{id, worker, attempt, lease expiry}...}
std::vector<core::InflightJob> ParseInflight(const Reply& answer) {
  std::vector<core::InflightJob> out;
  for (const Reply& j : QueuePayload(answer).elements) {
    out.push_back({static_cast<core::JobId>(j.at(0).AsInt()), j.at(1).str,
                   static_cast<int32_t>(j.at(2).AsInt()), j.at(3).AsInt()});
  }
  return out;
}

// {{id, payload, attempts, last error, failed at, {{attempt, error, at}...}}...}
std::vector<core::DeadJob> ParseDead(const Reply& answer) {
  std::vector<core::DeadJob> out;
  for (const Reply& j : QueuePayload(answer).elements) {
    core::DeadJob d;
    d.id = static_cast<core::JobId>(j.at(0).AsInt());
    d.payload = j.at(1).str;
    d.attempts = static_cast<int32_t>(j.at(2).AsInt());
    d.error = j.at(3).str;
    d.failed_at_ms = j.at(4).AsInt();
    for (const Reply& h : j.at(5).elements) {
      d.history.push_back({static_cast<int32_t>(h.at(0).AsInt()), h.at(1).str, h.at(2).AsInt()});
    }
    out.push_back(std::move(d));
  }
  return out;
}

// 0 cancelled, 1 unknown, 2 in flight
core::CancelOutcome ParseCancel(const Reply& answer) {
  int64_t code = QueuePayload(answer).AsInt();
  return code == 0   ? core::CancelOutcome::kCancelled
         : code == 2 ? core::CancelOutcome::kInFlight
                     : core::CancelOutcome::kUnknown;
}

bool ParseKeyRemovalUncounts(const Reply& answer) { return QueuePayload(answer).AsInt() == 1; }

// ---- queue.lua's schedules -------------------------------------------------------------------

namespace {
std::optional<int64_t> OptInt(const Reply& v) {
  if (v.type == Reply::Type::kNil) return std::nullopt;
  return v.AsInt();
}
// {id, record, spec, created, updated, handled, runs, paused, last_run, last_job, next}
// (queue.lua schedule_view): the spec from its bytes, the state from the fields.
std::optional<StoredSchedule> ScheduleOfView(const Reply& v) {
  if (v.type != Reply::Type::kArray || v.elements.size() < 11) return std::nullopt;
  StoredSchedule out;
  ByteReader in(v.at(2).str);
  if (!core::LoadSchedule(in, out.schedule) || !in.done()) return std::nullopt;
  out.schedule.id = v.at(0).str;
  out.record = v.at(1).str;
  core::ScheduleState& st = out.schedule.state;
  st.created_at_ms = v.at(3).AsInt();
  st.updated_at_ms = v.at(4).AsInt();
  st.handled_through_ms = v.at(5).AsInt();
  st.runs_done = v.at(6).AsInt();
  st.paused = v.at(7).AsInt() != 0;
  st.last_run_ms = OptInt(v.at(8));
  if (auto job = OptInt(v.at(9))) st.last_job = static_cast<core::JobId>(*job);
  st.next_ms = OptInt(v.at(10));
  return out;
}
// {now, views (false: none)}
ScheduleRead ReadOfPayload(const Reply& p) {
  ScheduleRead read;
  read.now_ms = p.at(0).AsInt();
  for (const Reply& v : p.at(1).elements) read.schedules.push_back(ScheduleOfView(v));
  return read;
}
}  // namespace

ScheduleRead ParseSchedules(const Reply& answer) { return ReadOfPayload(QueuePayload(answer)); }
ScheduleRead ParseDueSchedules(const Reply& answer) { return ReadOfPayload(QueuePayload(answer)); }
bool ParseScheduleWritten(const Reply& answer) { return QueuePayload(answer).AsInt() == 1; }
std::optional<StoredSchedule> ParseDeletedSchedule(const Reply& answer) {
  return ScheduleOfView(QueuePayload(answer));
}
bool ParseScheduleFired(const Reply& answer) { return QueuePayload(answer).at(0).AsInt() == 1; }

// ---- the feed of lifecycle events ------------------------------------------------------------

namespace {
// One entry's fields (prelude.lua's feed): t type, at ms, r room | q queue, n sequence,
// s session, a admission, j job, d detail, p position (room.position_near).
LifecycleEvent EventOfEntry(const Reply& fields) {
  LifecycleEvent e;
  for (size_t k = 0; k + 1 < fields.elements.size(); k += 2) {
    const std::string& f = fields.elements[k].str;
    const Reply& v = fields.elements[k + 1];
    if (f == "t") {
      e.type = v.str;
    } else if (f == "at") {
      e.at_ms = v.AsInt();
    } else if (f == "r") {
      e.room = v.str;
    } else if (f == "q") {
      e.queue = v.str;
    } else if (f == "n") {
      e.seq = static_cast<uint64_t>(v.AsInt());
    } else if (f == "s") {
      e.session = v.str;
    } else if (f == "a") {
      e.admission = static_cast<uint64_t>(v.AsInt());
    } else if (f == "j") {
      e.job = static_cast<uint64_t>(v.AsInt());
    } else if (f == "d") {
      e.detail = v.str;
    } else if (f == "p") {
      e.position = v.AsInt();
    }
  }
  return e;
}
}  // namespace

std::optional<EventRead> ParseEventRead(const Reply& answer) {
  EventRead read;
  read.reset = answer.at(0).AsInt() == 1;
  std::optional<EventId> from = EventId::Parse(answer.at(1).str);
  if (!from) return std::nullopt;
  read.last = *from;
  for (const Reply& entry : answer.at(2).elements) {
    std::optional<EventId> id = EventId::Parse(entry.at(0).str);
    if (!id) return std::nullopt;
    LifecycleEvent& e = read.events.emplace_back(EventOfEntry(entry.at(1)));
    e.id = *id;
    read.last = *id;
  }
  return read;
}

}  // namespace anteroom::store::redis
