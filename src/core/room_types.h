#pragma once
// Values that cross the engine interface for rooms: configuration, a session's view, a room's
// stats. Plain data, shared by every backend and the HTTP layer.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/outflow_estimate.h"
#include "core/room_event.h"
#include "core/room_pass.h"

namespace anteroom::core {

// Ranges accepted on the wire (enforced by the HTTP layer before the engine sees a value).
inline constexpr int64_t kMaxCapacity = 1'000'000'000;
inline constexpr int64_t kMaxDurationMs = 604'800'000;  // 7 days
inline constexpr int64_t kMaxAdmitPerMinute = 1'000'000'000;
inline constexpr size_t kMaxTargetUrlBytes = 2048;
inline constexpr size_t kMaxGateBytes = 16 * 1024;  // RoomConfig::gate, the JSON text
inline constexpr size_t kMaxPageBytes = 16 * 1024;  // RoomConfig::page, the JSON text
inline constexpr int64_t kMaxJoinsPerMinutePerClient = 100'000;
inline constexpr int64_t kMaxPlacesPerClient = 1'000'000;
// notify_at_position: a change that brings it in force walks the first N waiting once.
inline constexpr int64_t kMaxNotifyAtPosition = 10'000;
inline constexpr int64_t kMinChallengeDifficulty = 1;   // bits of proof of work (challenge.h)
inline constexpr int64_t kMaxChallengeDifficulty = 24;  // ~16M hashes: minutes in a browser
inline constexpr int64_t kDefaultChallengeDifficulty = 16;
// Clients a room keeps per-client state for, unless the server says otherwise
// (`anteroom serve --max-clients-per-room`): beyond it, joins of new clients are refused.
inline constexpr size_t kDefaultMaxClientsPerRoom = 1'000'000;
// Times the engine is given (ms since the epoch) lie in [0, kLatestTimeMs] (the year 3000), so
// a deadline (a time plus at most a few kMaxDurationMs) never overflows.
inline constexpr int64_t kLatestTimeMs = 32'503'680'000'000;

struct RoomConfig {
  int64_t capacity = 1;
  int64_t grace_ms = 30'000;
  int64_t checkin_timeout_ms = 30'000;
  std::optional<int64_t> idle_timeout_ms = 300'000;  // nullopt: never idle out
  std::optional<int64_t> admit_per_minute;           // nullopt: no rate cap
  bool paused = false;  // nobody is admitted from the line; holders keep their slots
  // Where the default waiting page sends admitted people (validated by the HTTP layer: an
  // absolute http(s) URL or a path starting with "/"). Plain data: the rules never read it.
  std::optional<std::string> target_url;
  // Per-client limits on joining (nullopt: off). A client is what the HTTP layer names it
  // (http/client_address.h: an IPv4 address or an IPv6 /64); only joins that carry one count.
  std::optional<int64_t> joins_per_minute_per_client;  // a token bucket of this many joins
  std::optional<int64_t> places_per_client;            // live places one client holds at once
  // Leading zero bits of proof of work a join must show (core/challenge.h); nullopt: none.
  std::optional<int64_t> challenge_difficulty;
  // The forward-auth gate's settings (cookie name, bypass rules, allowed return hosts) as one
  // JSON text, validated and canonicalized by the HTTP layer; nullopt: no gate settings. Plain
  // data, as target_url: the rules never read it, and every backend keeps it byte for byte.
  std::optional<std::string> gate;
  // The waiting page's settings (title, message, logo, colours, language, template) as one JSON
  // text, validated and canonicalized by the HTTP layer (server/page_settings.h); nullopt: the
  // defaults. Plain data, as gate: the rules never read it, every backend keeps it byte for byte.
  std::optional<std::string> page;
  // room.position_near is told once per session when its position first is <= this (a join at
  // such a position included); nullopt: never. Not under the random method (nobody has a
  // position there).
  std::optional<int64_t> notify_at_position;
  // How the room admits (core/room_event.h); an event running may override it.
  QueueingMethod queueing_method = QueueingMethod::kFifo;
};

// What a join brings besides the session id (Room::Check). The default, no client and no
// proof, is not limited per client, and cannot join a room that has a challenge.
struct Arrival {
  std::string client;      // the key per-client limits count under; empty: none
  int64_t proof_bits = 0;  // leading zero bits of a verified proof for this room and session
  std::string pass = {};   // a pass's code (core/room_pass.h); empty: none
};

// The fields a PUT names; the rest keep their value. Creating a room requires capacity.
struct RoomPatch {
  std::optional<int64_t> capacity;
  std::optional<int64_t> grace_ms;
  std::optional<int64_t> checkin_timeout_ms;
  std::optional<std::optional<int64_t>> idle_timeout_ms;
  std::optional<std::optional<int64_t>> admit_per_minute;
  std::optional<bool> paused;
  std::optional<std::optional<std::string>> target_url;  // inner nullopt: clear it
  std::optional<std::optional<int64_t>> joins_per_minute_per_client;
  std::optional<std::optional<int64_t>> places_per_client;
  std::optional<std::optional<int64_t>> challenge_difficulty;
  std::optional<std::optional<std::string>> gate;  // inner nullopt: clear it
  std::optional<std::optional<std::string>> page;  // inner nullopt: clear it
  std::optional<std::optional<int64_t>> notify_at_position;
  std::optional<QueueingMethod> queueing_method;
  // With queueing_method kQueueAll: everyone holding a slot goes back to the head of the line,
  // in admission order, their tokens revoked. An action, not a setting: never stored.
  bool include_active = false;

  void ApplyTo(RoomConfig& config) const;
};

// Whether every value lies in the wire ranges above. The HTTP layer enforces them; the log's
// records and snapshots are held to them on reading, so damage there cannot hand the rules a
// value they were never written for (a negative admission rate made Advance loop forever).
bool InRange(const RoomConfig& config);
bool InRange(const RoomPatch& patch);

// kPrequeue: in an event's pre-queue, waiting for its draw. kClosed: a join the room did not
// take (queueing method kReject); nothing of it is kept.
enum class SessionStatus : uint8_t { kWaiting, kActive, kGrace, kGone, kPrequeue, kClosed };
const char* ToString(SessionStatus status);

// In the random method a waiting session has no place, only odds: the chance that it is drawn
// next, and the waits by which a quarter, half and three quarters of those waiting now will be
// in (core::RandomWaitMs: people still joining make each draw's odds smaller).
struct WaitOdds {
  double chance_next = 0;
  std::optional<int64_t> p25_ms, p50_ms, p75_ms;
};

struct SessionView {
  std::string session;
  SessionStatus status = SessionStatus::kGone;
  int64_t position = 0;  // 1 = next in; 0 unless waiting (and in the random method)
  int64_t waiting = 0;
  int64_t active = 0;  // slot holders: active and in grace
  int64_t capacity = 0;
  std::optional<int64_t> eta_ms;
  uint64_t admission = 0;    // number of the admission that holds the slot (token claim "adm")
  uint64_t incarnation = 0;  // the room's incarnation, with the admission (token claim "inc")
  RoomPhase phase = RoomPhase::kOpen;
  QueueingMethod queueing_method = QueueingMethod::kFifo;
  std::optional<WaitOdds> odds;         // waiting in the random method
  std::optional<int64_t> starts_in_ms;  // the next event (or the one in its pre-queue) starts in
  std::optional<int64_t> ends_in_ms;    // the running (or next) event ends in
  int64_t refresh_after_ms = 0;         // how soon a polling client should ask again
};

struct RoomCounters {
  int64_t admitted_total = 0;  // sessions let in from the line
  int64_t dropped_total = 0;   // waiting sessions that stopped checking in, unclaimed admissions
  int64_t released_total = 0;  // slots freed (final leave, grace over, eviction, unclaimed)
  int64_t passes_used = 0;     // redemptions of passes
};

// Estimated wait of the waiting session at `position`: the position over the rate at which
// slots are freed (flow.out_per_ms, measured by core::EstimateFlow), rounded up, and no sooner
// than the admission-rate cap allows; nullopt when the outflow is 0 (none measured).
// The one formula every backend and the live channel use.
std::optional<int64_t> EtaMs(int64_t position, const Flow& flow,
                             std::optional<int64_t> admit_per_minute);

// The odds a waiting session has in the random method, with `waiting` in line (nullopt when
// nobody waits): each is next with chance 1/waiting, and the waits by which a quarter, half and
// three quarters of those waiting now will be in are core::RandomWaitMs of the flow, allowing
// for its rates' noise (the outflow no faster than the rate cap, which is exact once it binds;
// nullopt when nobody moves: `moving` false, or no outflow measured).
std::optional<WaitOdds> RandomOdds(int64_t waiting, const Flow& flow,
                                   std::optional<int64_t> admit_per_minute, bool moving);

// The phase a status shows (RoomPhase, core/room_event.h) of a room admitting by `method`:
// closed under reject; prequeue while an event's pre-queue is open (or its draw is being
// published); open under passthrough; queue while anyone waits, every slot is held, admissions
// are paused or braked (queue_all); open otherwise. Room::Phase, and the Redis backend from
// what its scripts answer.
RoomPhase PhaseOf(QueueingMethod method, bool prequeue_open, int64_t waiting, int64_t holders,
                  int64_t capacity, bool paused);

// How soon a polling client should ask again (SessionView::refresh_after_ms), in
// [250 ms, 30 s]: within half of what keeps it present (the check-in timeout, the idle
// timeout), sooner in a pre-queue about to start (its start) or being drawn (500 ms), while
// waiting at most 10 s and about half the `eta_ms` (sooner near the front); 30 s when closed;
// 0 when gone (join again now).
int64_t RefreshAfterMs(SessionStatus status, int64_t checkin_timeout_ms,
                       std::optional<int64_t> idle_timeout_ms, std::optional<int64_t> starts_in_ms,
                       std::optional<int64_t> eta_ms);

// Session ids packed in one buffer: a line of 100k costs two allocations, not 100k.
class IdList {
 public:
  void Add(std::string_view id) {
    bytes_.append(id);
    ends_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  size_t size() const { return ends_.size(); }
  std::string_view operator[](size_t i) const {
    size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(bytes_).substr(begin, ends_[i] - begin);
  }
  void Reserve(size_t ids, size_t bytes) {
    ends_.reserve(ids);
    bytes_.reserve(bytes);
  }

 private:
  std::string bytes_;
  std::vector<uint32_t> ends_;
};

// What live channels need to tell each connected session its place, read once per tick for
// everyone instead of once per session (Backend::ReadLine).
struct LineView {
  // Changes whenever the line or a slot holder changes (not when only time passes). Starts
  // from the room's creation time, so a re-created room does not repeat an old version.
  uint64_t version = 0;
  bool changed = false;  // false: `version` was the caller's, and `line` is left empty
  int64_t active = 0;
  int64_t waiting = 0;
  int64_t capacity = 0;
  Flow flow;  // the ETA basis (EtaMs, RandomOdds), as of the read
  std::optional<int64_t> admit_per_minute;
  bool paused = false;             // no ETA while admissions are paused
  int64_t checkin_timeout_ms = 0;  // how often connected sessions must be kept present
  std::optional<int64_t> idle_timeout_ms;
  RoomPhase phase = RoomPhase::kOpen;
  QueueingMethod queueing_method = QueueingMethod::kFifo;
  // The event the statuses speak of (open, or the next scheduled): its times, ms since the epoch.
  std::optional<int64_t> event_starts_at;
  std::optional<int64_t> event_ends_at;
  IdList line;  // everyone waiting, first in line first
};

struct RoomInfo {
  std::string room;
  RoomConfig config;                 // the room's own settings
  RoomConfig effective;              // what applies now: with a running event's overrides
  std::optional<std::string> event;  // the event in its pre-queue or running (not suspended)
  RoomPhase phase = RoomPhase::kOpen;
  int64_t prequeued = 0;  // in the pre-queue or a draw not yet published
  int64_t active = 0;
  int64_t waiting = 0;
  RoomCounters counters;
};

}  // namespace anteroom::core
