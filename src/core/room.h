#pragma once
// The rules of one waiting room, as plain state over an injected time (no I/O, no locking).
//
// Invariants (checked by tests/unit/room_test.cc and the model test):
//  - holders (active + grace) <= capacity, except after capacity was lowered: then nobody is
//    admitted until holders < capacity.
//  - Work-conserving: after every call, nobody waits while holders < capacity, unless the
//    room is paused or the admission-rate cap forbids an admission right now.
//  - Paused: nobody is admitted from the line (new arrivals join it, holders may leave and
//    their slots stay free, deadlines run as usual) and waiting sessions have no ETA.
//    Resuming admits at once, in line order, as far as capacity and the rate cap allow.
//  - First come, first served: the line is admitted in arrival order.
//  - Every deadline is processed at its own time, in (time, kind) order, whenever the room is
//    next touched or Advance() is called, so the outcome does not depend on when a timer fires.
//    At equal times, waiting drop-outs go before everything else.
//
// Deadlines per session (one heap entry each; the key may be earlier than the true deadline,
// never later, and is re-keyed lazily when reached, so a check-in costs no heap work):
//  - waiting:  last_seen + checkin_timeout                  -> dropped
//  - active:   admitted + checkin_timeout while unclaimed   -> dropped, slot freed
//              last_seen + idle_timeout                     -> grace (as if it had left)
//  - grace:    grace_until                                  -> gone, slot freed
//
// Per-client limits (RoomConfig::joins_per_minute_per_client, places_per_client), on joins
// that name a client (Arrival::client) while either limit is on ("tracked" joins):
//  - a tracked session counts as a place of its client from its join until it is gone;
//    sessions that joined untracked never count, even once a limit is turned on;
//  - a client's token bucket holds joins_per_minute_per_client joins and refills continuously
//    (one join per 60,000 / N ms); each tracked join takes one, check-ins of known sessions
//    never do, a refused join takes nothing. Changing the figure refills every bucket;
//  - the room keeps state for exactly the clients that hold a place or whose bucket is not
//    full (forgotten at the moment their bucket is full again, as of the last Advance); at
//    most max_clients of them: a join of any other client is refused while the table is full;
//  - refusals answer kRateLimited with retry_after_ms: the bucket's wait for a token; the
//    check-in timeout for places_per_client (a place left behind drops out by then); 60 s for
//    a full table (buckets refill within a minute).
// A room with a challenge (challenge_difficulty) refuses joins whose proof shows fewer bits,
// before any per-client limit is looked at (kChallengeRequired). Refused joins change nothing.
//
// Launch day (room_events.cc; the types in room_event.h):
//  - Queueing methods: kFifo admits the line in order; kRandom draws who is next from the line
//    (the room's seed's stream, so a replay draws the same); kPassthrough admits every arrival
//    and everyone waiting, whatever the capacity; kReject answers joins kClosed and keeps
//    nothing, while the line still moves; kQueueAll admits nobody. A switch never reorders
//    the line (it stays in arrival order under every method), so switching back finds everyone
//    where they were; kQueueAll with include_active sends the holders to its head.
//  - Events (at most one opens at a time: no two overlap): from prequeue_at to starts_at new
//    arrivals go to the pre-queue (kPrequeue), which the line ignores; at starts_at the
//    pre-queue is drawn: taken in arrival order and, with shuffle_at_start, permuted by forward
//    Fisher-Yates from a seed (core/draw.h). Positions are published into the line in the
//    drawn order as they become final (DrawStep, in bounded chunks the backend drives and
//    logs); arrivals during the draw wait in the pre-queue and follow the drawn, in arrival
//    order. From starts_at to ends_at the overrides apply (config() stays the room's own;
//    the rules read the effective settings). Stage changes are deadlines: processed at their
//    times, in order with the others.
//  - A draw holds slab indices, so none is reused until it is over.
//
// Notify when near (notify_at_position N): room.position_near is noted once per session, the
// first time its position is <= N after a call (at a join too), with that position. The waiting
// (front line, then the line) start with a prefix of near_noted_ sessions that were all noted;
// after every change the prefix is extended to N (or everyone), noting those not noted before.
// A removal inside the prefix shortens it. An arrival inside it lengthens it when noted before;
// else one with a pass (to the front line) is noted at once when its position is <= N, and
// holders sent back to the head end the prefix before them (the next SettleNear notes them at
// their positions). Skipped under the random method; saved with the room.

#include <boost/unordered/unordered_flat_map.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/bytes.h"
#include "common/op_status.h"
#include "core/chunked_slab.h"
#include "core/deadline_heap.h"
#include "core/draw.h"
#include "core/id_hash.h"
#include "core/incremental_index.h"
#include "core/line.h"
#include "core/minute_window.h"
#include "core/outflow_estimate.h"
#include "core/room_notice.h"
#include "core/room_types.h"
#include "core/session_id.h"

namespace anteroom::core {

class Room {
 public:
  // The rules' constants (the Redis backend's room.lua gets them from store/redis/lua_rules.cc).
  // A tracked join takes kTokenUnits of its client's bucket, which refills at
  // joins_per_minute_per_client units per ms (ms per minute: an exact integer refill).
  static constexpr int64_t kTokenUnits = 60'000;
  // How long a refused join is told to wait: a full client table, kTableFullRetryMs (buckets
  // refill within a minute); places_per_client, the check-in timeout, at least
  // kPlacesRetryMinMs.
  static constexpr int64_t kTableFullRetryMs = 60'000;
  static constexpr int64_t kPlacesRetryMinMs = 1'000;
  // Deadline kinds, in the order deadlines at equal times go: waiting drop-outs first.
  static constexpr int kKindDropout = 0;
  static constexpr int kKindOther = 1;

  // `revocation_ttl_ms`: how long a revoked session's tokens must be remembered (the token TTL).
  Room(RoomConfig config, int64_t revocation_ttl_ms, int64_t now_ms);
  Room(const Room&) = delete;
  Room& operator=(const Room&) = delete;

  // The room's own settings (what PUT set); effective(): with a running event's overrides.
  const RoomConfig& config() const { return own_; }
  const RoomConfig& effective() const { return config_; }
  void Reconfigure(const RoomPatch& patch, int64_t now_ms);

  // ---- launch day (room_events.cc) ----
  // Every event of the room, in time order.
  const std::vector<RoomEvent>& events() const { return events_; }
  // Adds or changes event `id` (core/schedule.h says what may change); answers it as stored.
  OpResult<RoomEvent> PutEvent(std::string_view id, const EventSpec& spec, int64_t now_ms);
  // Cancels it: a pre-queue it holds joins the line in arrival order, its overrides end.
  OpResult<RoomEvent> DeleteEvent(std::string_view id, int64_t now_ms);
  // A draw with shuffle_at_start began (at an Advance) and waits for its seed: the backend
  // draws 256 random bits, logs them, and calls SeedDraw before anything else changes.
  bool NeedsSeed() const;
  void SeedDraw(const DrawSeed& seed);
  // Positions of a draw are left to publish: the backend calls DrawStep until it is over.
  bool Drawing() const;
  // Publishes up to `max_positions` more drawn positions into the line (and, when the draw is
  // over, the pre-queue's later arrivals behind them); answers how many it took.
  size_t DrawStep(size_t max_positions, int64_t now_ms);
  // The room's own seed, for the random method's picks: set once when the room is created.
  void set_seed(const DrawSeed& seed);
  const DrawSeed& seed() const { return seed_; }
  // ---- passes (room_passes.cc; core/room_pass.h) ----
  // Keeps passes the backend minted (ids new to the room); kLimitReached past kMaxPassesPerRoom.
  OpResult<Done> AddPasses(std::vector<RoomPass> passes, int64_t now_ms);
  // Every pass, by creation then id.
  std::vector<RoomPass> Passes() const;
  // Revokes one (kNotFound when unknown) or, with nullopt, all; answers how many.
  OpResult<int64_t> RevokePasses(std::optional<std::string_view> id, int64_t now_ms);
  // A check that redeemed pass `pass_id` before (log replay): its use is taken again, never
  // refused by the code (checked when it was made); kInternal when the pass is not there.
  OpResult<SessionView> RedeemRecorded(std::string_view session, std::string_view client,
                                       std::string_view pass_id, int64_t now_ms);

  // The phase a status shows (RoomPhase), as of the room's time.
  RoomPhase Phase() const;
  int64_t prequeued() const { return static_cast<int64_t>(prequeue_.size() + DrawLeft()); }
  // The id of the event in its pre-queue or running (not suspended), if any.
  std::optional<std::string> open_event() const;

  // Joins (unknown or gone session), or checks in. Answers only active or waiting. A join is
  // refused by the challenge or a per-client limit (see above); a check-in never is.
  OpResult<SessionView> Check(std::string_view session, const Arrival& arrival, int64_t now_ms);
  // A check that was accepted before (log replay): a join is counted for `client` as then, and
  // never refused, as limits were applied when it was made.
  SessionView CheckRecorded(std::string_view session, std::string_view client, int64_t now_ms);
  // Joins or checks in with no client and no limits (tools and tests).
  SessionView Check(std::string_view session, int64_t now_ms) {
    return CheckRecorded(session, {}, now_ms);
  }
  // Activity of a known session: refreshes presence; a session in grace is active again.
  OpResult<SessionView> Touch(std::string_view session, int64_t now_ms);
  // Waiting: out of the line. Active: grace (or gone at once when final).
  OpResult<SessionView> Leave(std::string_view session, bool final, int64_t now_ms);
  // The app ends a session: slot freed at once, tokens revoked.
  OpResult<SessionView> Evict(std::string_view session, int64_t now_ms);
  // True when tokens of `admission` for this session were revoked.
  bool IsRevoked(std::string_view session, uint64_t admission, int64_t now_ms);
  // The session holding admission number `admission` (active or in grace), nullopt once it
  // ended: every end of an admission revokes its tokens, so a token whose admission nobody
  // holds is revoked. Tokens name the admission, not the session (their `sub` is opaque).
  std::optional<std::string> AdmissionHolder(uint64_t admission, int64_t now_ms);

  // The room's incarnation: set once when the room is created (a random number, so a room
  // deleted and created again under the same name has another), carried in tokens (`inc`).
  // Rooms created before incarnations existed have 0.
  uint64_t incarnation() const { return incarnation_; }
  void set_incarnation(uint64_t incarnation) { incarnation_ = incarnation; }

  // Live connections: a check-in of each known session (grace -> active, an admission is
  // claimed), never a join. Answers a view per id, gone for unknown ones. `changed`, if given,
  // gets the positions in `ids` whose check-in changed more than presence (checkin_changes).
  std::vector<SessionView> Present(const std::vector<std::string>& ids, int64_t now_ms,
                                   std::vector<uint32_t>* changed = nullptr);
  // The line in order and the counts, for live channels. The line is copied only when the
  // version differs from `since`.
  LineView ReadLine(uint64_t since, int64_t now_ms);
  uint64_t version() const { return version_; }

  // Processes every deadline <= now_ms. Cheap when nothing is due.
  void Advance(int64_t now_ms);

  // Presence deadlines (a waiting session's check-in timeout, an active one's idle timeout)
  // follow last_seen, which check-ins refresh. A check-in that changes nothing else is not
  // logged (it would be one record per check), so a durable room reports these expiries for
  // the log instead, and a replay applies them from the log rather than from the times:
  //  - kTimed:    processed at their times (memory only; and replays of logs written before
  //               expiries were logged);
  //  - kReported: processed at their times, each one also kept in seen_expiries() until
  //               ClearSeenExpiries() (the backend logs them before the next change);
  //  - kReplayed: never processed by time: ApplySeenExpiry() applies each logged one. The
  //               other deadlines (unclaimed admissions, grace, the rate cap) follow only
  //               from logged changes and stay timed.
  // Changing it re-keys nothing: keys may stay earlier than the new deadlines (lazy), and
  // kTimed/kReported keys are never later than kReplayed ones. To leave kReplayed, Restart.
  enum class Presence : uint8_t { kTimed, kReported, kReplayed };
  void set_presence(Presence presence) { presence_ = presence; }
  Presence presence() const { return presence_; }
  struct SeenExpiry {
    int64_t when;  // the deadline's time (it took effect then, or at the room's time if later)
    std::string session;
  };
  const std::vector<SeenExpiry>& seen_expiries() const { return seen_expiries_; }
  void ClearSeenExpiries() { seen_expiries_.clear(); }
  // A logged expiry of `session` whose deadline was `at`: every other deadline before it is
  // processed first, then a waiting session drops out, an active one goes to grace. False (and
  // nothing beyond those earlier deadlines changed) when the session is not waiting or active then:
  // the log does not match the room.
  bool ApplySeenExpiry(std::string_view session, int64_t at);
  // A restart: Advance(now_ms) as the room is, then every session present counts as seen at
  // that time (check-in times are not logged) and the room goes on under `presence`, every
  // deadline re-keyed exactly.
  void Restart(int64_t now_ms, Presence presence);
  // Bumped by every change a check-in, touch or live presence can make beyond refreshing
  // last_seen (a join, a claimed admission, a return from grace): a call that leaves it as it
  // was needs no log record.
  uint64_t checkin_changes() const { return checkin_changes_; }
  // Earliest time at which Advance has work, INT64_MAX when none.
  int64_t NextDeadline() const;

  // How many clients the room keeps per-client state for at most (a server setting, not saved).
  void set_max_clients(size_t max_clients) { max_clients_ = max_clients; }
  size_t clients() const { return client_index_.size(); }
  // The places a client holds (0 when the room keeps nothing for it).
  int64_t PlacesOf(std::string_view client) const;

  int64_t holders() const { return holders_; }
  int64_t waiting() const { return static_cast<int64_t>(front_.size() + line_.size()); }
  const RoomCounters& counters() const { return counters_; }
  size_t sessions() const { return index_.size(); }
  size_t MemoryBytes() const;

  // ---- notices (core/room_notice.h) ----
  // While noting, what happens is kept as notices until TakeNotices (the backend makes them
  // lifecycle events after each call). Off while a log is replayed: those were told when they
  // happened. The count goes on either way, so a replayed room numbers its next notice as the
  // live one did.
  void set_noting(bool on) { noting_ = on; }
  std::vector<RoomNotice> TakeNotices() { return std::exchange(notices_, {}); }
  uint64_t notice_seq() const { return notice_seq_; }
  // The room's last notice, for the backend to tell when it deletes the room.
  RoomNotice DeletionNotice(int64_t now_ms);

  // Snapshots (room_snapshot.cc): the whole state, so that a restored room answers and expires
  // exactly as this one would have. Restore fills a room just constructed (any config); false
  // when the bytes do not decode (the room is then unusable).
  void Save(ByteWriter& out) const;
  bool Restore(ByteReader& in);

 private:
  struct Session {
    SessionId id;
    int64_t last_seen = 0;  // last check-in or touch
    // Waiting or pre-queued: when it joined the line, or was sent back to it (0: not known, a
    // session saved before this was kept); active: admitted at; grace: grace ends at.
    int64_t since = 0;
    uint64_t admission = 0;
    Line::Ticket ticket = 0;
    SessionStatus status = SessionStatus::kWaiting;
    bool claimed = false;
    bool drawn = false;  // kPrequeue: in the draw's order (not in prequeue_), not published yet
    bool front = false;  // kWaiting: in front_ (came with a pass), not in line_
    bool near = false;   // room.position_near noted (once per session)
    uint32_t client = kNoClient;  // the client its join counted for (tracked joins only)
  };
  using Index = uint32_t;
  static constexpr Index kNoIndex = UINT32_MAX;

  // Per-client state, for clients that hold a place or whose bucket is not full.
  struct Client {
    std::string key;     // empty: a free slot
    int64_t places = 0;  // live tracked sessions that joined as this client
    // The bucket as debt: kTokenUnits per join taken, repaid at `rate` units per ms (rate =
    // joins_per_minute_per_client), so a full bucket is 0 and an empty one kTokenUnits x rate.
    int64_t debt = 0;
    int64_t debt_at = 0;  // when `debt` was last written
  };
  static constexpr uint32_t kNoClient = UINT32_MAX;

  // Hash and equality over slab indices, looked up by id: the id is stored once, in the slab.
  struct IdHash {
    using is_transparent = void;
    const ChunkedSlab<Session>* slab;
    size_t operator()(Index i) const { return (*this)((*slab)[i].id.view()); }
    size_t operator()(std::string_view id) const { return HashId(id); }
  };
  struct IdEq {
    using is_transparent = void;
    const ChunkedSlab<Session>* slab;
    bool operator()(Index a, Index b) const { return a == b; }
    bool operator()(std::string_view id, Index i) const { return (*slab)[i].id.view() == id; }
    bool operator()(Index i, std::string_view id) const { return (*slab)[i].id.view() == id; }
  };
  // The same over the client slab, by key.
  struct ClientHash {
    using is_transparent = void;
    const std::vector<Client>* slab;
    size_t operator()(uint32_t c) const { return (*this)((*slab)[c].key); }
    size_t operator()(std::string_view key) const { return HashId(key); }
  };
  struct ClientEq {
    using is_transparent = void;
    const std::vector<Client>* slab;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(std::string_view key, uint32_t c) const { return (*slab)[c].key == key; }
    bool operator()(uint32_t c, std::string_view key) const { return (*slab)[c].key == key; }
  };

  static constexpr uint64_t kNever = UINT64_MAX;
  static uint64_t Key(int64_t when, int kind) { return (static_cast<uint64_t>(when) << 1) | kind; }

  Index Find(std::string_view id) const;
  Index Join(std::string_view id, int64_t now);
  void Free(Index i);
  uint64_t DueKey(const Session& s) const;
  void Reschedule(Index i);  // lowers the heap key if the true deadline moved earlier
  void RekeyAll();
  uint64_t RateOpenKey(int64_t now) const;
  void Fill(int64_t now);  // AdmitWhileFree, then SettleNear
  void Admit(Index i, int64_t now);
  void Release(Index i, int64_t now, bool dropped);
  void Revoke(const Session& s, int64_t now);
  void ProcessDue(Index i, int64_t when);
  // Processes every deadline whose key is below `limit`.
  void ProcessBefore(uint64_t limit);
  // An active session not seen for idle_timeout: treated as having left at `when`.
  void GoIdle(Index i, int64_t when);
  void ReportSeenExpiry(Index i);  // before the session changes
  SessionView View(Index i, int64_t now) const;
  SessionView GoneView(std::string_view id) const;
  SessionView ClosedView(std::string_view id) const;  // a join the room does not take
  // Out of the room for good: out of the line, or the slot released (and refilled).
  SessionView End(Index i, std::string_view id, NoticeKind why);
  void DropWaiting(Index i);
  // A check-in of a known session: grace ends, an admission is claimed.
  void ClaimPresence(Index i);
  std::optional<int64_t> Eta(int64_t position, int64_t now) const;
  void ForgetOldRevocations(int64_t now);
  // Out of the line it waits in (the line, the pre-queue, or the draw's order).
  void Unline(Index i);

  // Launch day (room_events.cc).
  RoomConfig EffectiveConfig() const;  // own_ with the running event's overrides
  // config_ = EffectiveConfig(), and what that changes; `fresh_presence` for an event's change.
  void ApplyEffective(int64_t now, bool fresh_presence = false);
  const RoomEvent* OpenEvent() const;    // the event in its pre-queue or running, not suspended
  const RoomEvent* StatusEvent() const;  // OpenEvent, else the next scheduled one
  bool PrequeueOpen() const;             // arrivals go to the pre-queue (or a draw is on)
  void ProcessBoundary(int64_t when);    // the earliest stage change, due at `when`
  void ComputeNextBoundary();
  uint64_t BoundaryKey() const;
  void OpenPrequeue(const RoomEvent& e, int64_t now);
  void StartEvent(RoomEvent& e, int64_t now);
  void ReleasePrequeue();  // the pre-queue joins the line in arrival order
  void SendHoldersBack(bool to_prequeue, int64_t now);
  size_t DrawLeft() const;
  void FinishDraw();
  Index PickNext();
  std::optional<WaitOdds> Odds(int64_t now) const;
  void AddEventFields(SessionView& v, int64_t now) const;
  bool RestoreLaunch(ByteReader& in);  // room_snapshot.cc
  // Passes (room_passes.cc).
  std::optional<OpResult<SessionView>> PassRefusal(std::string_view code) const;
  OpResult<SessionView> UsePass(std::string_view session, std::string_view client,
                                std::string_view pass_id);
  Index NextToAdmit();  // the front line first, then the method's pick
  void SaveLaunch(ByteWriter& out) const;

  // A notice of `kind` at `at`, about session i if given (room.cc, "notices").
  void Note(NoticeKind kind, int64_t at, Index i = kNoIndex, std::string detail = {},
            int64_t position = 0);
  // Notify when near (room.cc, "notify when near"; see the top of this file).
  int64_t WaitingPosition(const Session& s) const;  // requires kWaiting
  Index WaitingAt(int64_t position) const;          // 1 <= position <= waiting()
  void Unprefix(const Session& s);                  // before s leaves front_ or line_
  void PrefixArrival(Index i, int64_t now);         // after i came into front_ (a pass)
  // After `block` came to the head of line_ (holders sent back), in this order.
  void PrefixArrivals(const std::vector<Index>& block);
  void SettleNear(int64_t now);  // the prefix extended to N
  // Admits while slots are free (Fill without SettleNear).
  void AdmitWhileFree(int64_t now);

  // Per-client limits (room.cc, "clients").
  bool LimitsClients() const {
    return config_.joins_per_minute_per_client.has_value() || config_.places_per_client.has_value();
  }
  uint32_t FindClient(std::string_view key) const;
  int64_t DebtAt(const Client& c, int64_t now) const;
  int64_t FullAt(const Client& c) const;
  // Why a join must be refused now, if it must (the challenge, then the per-client limits).
  std::optional<OpResult<SessionView>> JoinRefusal(const Arrival& arrival) const;
  // A join of session i made as `client`: counted, a token taken (tracked joins only).
  void CountJoin(Index i, std::string_view client);
  // Session i is gone: its client holds one place less.
  void CountGone(Index i);
  void ForgetClient(uint32_t c);
  void ForgetFullBuckets(int64_t now);
  void RefillAllBuckets();
  bool RestoreClients(ByteReader& in);  // room_snapshot.cc

  RoomConfig own_;     // as PUT set it
  RoomConfig config_;  // what the rules use: own_ with a running event's overrides
  int64_t revocation_ttl_ms_;
  int64_t now_ = 0;  // the latest time seen; time never goes backwards inside a room

  // Chunked: a growth never copies the sessions (a 10M room's would be a 0.7 GB copy, a stall
  // of hundreds of ms) nor leaves up to half the array unused.
  ChunkedSlab<Session> slab_;
  std::vector<Index> free_;
  // Grows a step per join rather than all at once (a whole rehash stalled a 10M room's join
  // for 754 ms).
  IncrementalIndex<IdHash, IdEq> index_;
  Line line_;
  DeadlineHeap deadlines_;

  int64_t holders_ = 0;
  uint64_t admissions_ = 0;
  uint64_t incarnation_ = 0;
  // Admission number -> the session holding it (active or grace); derived, not saved.
  boost::unordered_flat_map<uint64_t, Index> held_;
  // Bumped by every change of the line or of a slot holder's status (not saved: live channels
  // only compare it with what they read from this process).
  uint64_t version_;
  MinuteWindow admitted_window_;
  // Slots freed (the outflow) and joins to the line (the inflow): the ETA's measurements.
  FlowHistory outflow_;
  FlowHistory inflow_;
  // MeasureRate of each as of a whole second, remembered until the second or the history
  // changes: asked on every waiting check. Apart, so that a join (the inflow, read by the random
  // method's odds alone) does not make a fifo check estimate the outflow again.
  struct RateMemo {
    int64_t second = INT64_MIN;
    Measured rate;
  };
  Measured RateAt(const FlowHistory& history, RateMemo& memo, int64_t now) const;
  Flow FlowAt(int64_t now) const {
    Measured out = RateAt(outflow_, outflow_memo_, now), in = RateAt(inflow_, inflow_memo_, now);
    return Flow{out.per_ms, in.per_ms, out.events, in.events};
  }
  mutable RateMemo outflow_memo_, inflow_memo_;
  RoomCounters counters_;
  // Notices counted (saved): kCreated is the first, so a new room starts at 1.
  uint64_t notice_seq_ = 1;
  int64_t near_noted_ = 0;  // the waiting's prefix noted room.position_near (saved)
  // A replayed expiry's time, whose SettleNear waits for the rest of its millisecond (-1: none;
  // never set in a live room, whose calls end settled).
  int64_t unsettled_near_ = -1;
  bool noting_ = false;
  std::vector<RoomNotice> notices_;

  struct Revoked {
    uint64_t admission;
    int64_t until;
  };
  std::unordered_map<std::string, Revoked> revoked_;
  std::deque<std::pair<int64_t, std::string>> revoked_order_;  // by `until`, for forgetting

  std::vector<Client> clients_;
  std::vector<uint32_t> free_clients_;
  IncrementalIndex<ClientHash, ClientEq> client_index_;
  // Clients that hold no place, by the time their bucket is full again (then forgotten).
  DeadlineHeap client_refills_;
  size_t max_clients_ = kDefaultMaxClientsPerRoom;

  std::vector<RoomEvent> events_;  // in time order (they never overlap)
  // Derived from events_ (ComputeNextBoundary): the earliest stage change of an event not
  // suspended, the event in its pre-queue or running, and the next one scheduled (-1: none).
  int64_t next_boundary_ = INT64_MAX;
  int open_ = -1;
  int upcoming_ = -1;
  Line prequeue_;  // kPrequeue sessions not in a draw, in arrival order
  Line front_;     // waiting with a pass: admitted before line_, in the order they came
  std::unordered_map<std::string, RoomPass> passes_;
  struct Draw {
    std::string event;
    bool shuffle = false;
    int64_t at = 0;
    std::vector<Index> order;       // the pre-queue in arrival order, until seeded
    std::optional<FisherYates> fy;  // shuffled draws, once seeded
    size_t published = 0;           // positions moved into the line
  };
  std::optional<Draw> draw_;
  std::vector<Index> free_after_draw_;  // freed while a draw holds indices
  DrawSeed seed_{};
  std::optional<DrawStream> picks_;  // the random method's stream, from seed_
  uint64_t picks_used_ = 0;          // words of it used (saved: a restored room goes on)

  Presence presence_ = Presence::kTimed;
  std::vector<SeenExpiry> seen_expiries_;  // kReported: not yet taken by the backend
  uint64_t checkin_changes_ = 0;
};

}  // namespace anteroom::core
