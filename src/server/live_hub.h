#pragma once
// The live channel's engine room: every open WebSocket/SSE stream of a session, per room, and
// what each client was last told.
//
// Once per tick (250 ms by default) and per room with streams, the hub reads the room's line
// once (Backend::ReadLine; the line itself only when its version moved) and walks it in order:
// a session's position is its index in that walk, so a change costs one ordered sweep of the
// line, never a backend lookup per client.
//
// Delivery goes in rounds: a round shows every connected session the latest line once, and
// starts at most once per tick, so a client gets at most one message per tick (4/s at the
// default). A round goes out in chunks of LiveHubOptions::chunk messages; the next chunk is
// made while the last one is written (back-pressure: one in flight), from the line read again
// if it is older than LiveHubOptions::reread_ms. So when pushing to everyone takes longer than
// a tick, a change waits about one round, not the rest of a stale round and then a new one.
//
// A client is sent its status only when something it shows (status, position, waiting,
// active, capacity, eta) changed. Changes of the counts alone (waiting, active, capacity, eta
// with the same status and position: e.g. people joining behind) go out at most once a second
// per client, which keeps a join surge from costing everyone four messages a second.
//
// Open streams count as continuous check-ins: the hub checks every connected session in with
// one Backend::Present per room at a third of the room's check-in timeout, and at once for
// sessions that just left the line (admitted: the token goes out on that answer). When the last
// stream of a session closes, the session is checked in once more (its drop-out clock starts
// at that moment) and, if it holds a slot, leaves without final (grace starts then). Every
// stream is bound to the room's presence limit (LiveStream::BoundSilence), so a client that
// vanished without closing stops counting as present within the room's check-in timeout.
//
// All hub state lives on one thread (the `home` io_context); streams get their messages on
// their own threads, one batch per thread per tick.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "core/room_types.h"
#include "core/token.h"
#include "http/live_stream.h"
#include "store/backend.h"

namespace anteroom::server {

using http::LiveStream;

struct LiveHubOptions {
  int64_t tick_ms = 250;
  size_t present_batch = 2'000;  // sessions per Present call (one script each on Redis)
  // Messages per chunk of a delivery round. Between chunks the hub reads the line again (at
  // most every reread_ms), so in a long round each client is shown the line as it is when its
  // turn comes, and HTTP requests on the same threads are served between chunks.
  size_t chunk = 2'048;
  // A read costs a copy of the line when it moved: cheap in memory, a whole-line script on
  // Redis (where the server reads at most once per tick instead).
  int64_t reread_ms = 100;
  // Open streams per session at most; another closes the oldest (docs/api.md, live channel).
  size_t max_streams_per_session = 4;
};

class LiveHub {
 public:
  LiveHub(store::Backend& backend, const core::TokenSigner& signer, const Clock& clock,
          boost::asio::io_context& home, LiveHubOptions options = {});
  ~LiveHub();
  LiveHub(const LiveHub&) = delete;
  LiveHub& operator=(const LiveHub&) = delete;

  void Start();
  // Stops ticking (streams stay open until the server closes).
  void Stop();

  // A stream opened by a check-in that answered `first`. Call on the stream's thread: the first
  // status goes out at once.
  void Attach(std::string room, core::SessionView first, std::shared_ptr<LiveStream> stream);

  // A session that opening a stream created is known to its client only from the stream's first
  // message. Until Delivered() is called, dropping the guard makes the session leave for good: a
  // failed handshake or a connection lost before that message would otherwise leave a session
  // nobody can use, holding a place in line (or a slot) until it times out.
  class NewSessionGuard {
   public:
    NewSessionGuard(LiveHub& hub, std::string room, std::string session)
        : hub_(hub), alive_(hub.alive_), room_(std::move(room)), session_(std::move(session)) {}
    ~NewSessionGuard();
    NewSessionGuard(const NewSessionGuard&) = delete;
    NewSessionGuard& operator=(const NewSessionGuard&) = delete;
    void Delivered() { delivered_.store(true, std::memory_order_release); }

   private:
    LiveHub& hub_;
    std::weak_ptr<bool> alive_;  // the hub's: nothing to do once the server is gone
    std::string room_, session_;
    std::atomic<bool> delivered_{false};
  };
  std::shared_ptr<NewSessionGuard> GuardNewSession(std::string room, std::string session) {
    return std::make_shared<NewSessionGuard>(*this, std::move(room), std::move(session));
  }

  // Live streams now open (any thread).
  size_t streams() const { return streams_.load(std::memory_order_relaxed); }

  // The status message for a session (JSON text), as every stream sends it.
  std::string StatusMessage(std::string_view room, const core::SessionView& view) const;

 private:
  // What a client was last shown; a new message only when this changes.
  struct Shown {
    core::SessionStatus status = core::SessionStatus::kGone;
    int64_t position = -1, waiting = -1, active = -1, capacity = -1;
    std::optional<int64_t> eta_ms;
    core::RoomPhase phase = core::RoomPhase::kOpen;
    core::QueueingMethod queueing_method = core::QueueingMethod::kFifo;
    std::optional<int64_t> event_starts_at = {};  // a moved event is told at once
    std::optional<int64_t> event_ends_at = {};
    bool operator==(const Shown&) const = default;
  };
  struct Watch {  // one session with open streams in one room
    std::vector<std::shared_ptr<LiveStream>> streams;
    Shown shown;
    int64_t shown_ms = 0;    // when `shown` was sent
    core::SessionView last;  // the latest view; position from the line walk
    uint64_t walk = 0;       // the line walk that last saw it waiting
    bool check_in_now = false;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct RoomWatch {
    boost::unordered_flat_map<std::string, Watch, StringHash, std::equal_to<>> sessions;
    uint64_t version = 0;
    uint64_t walk = 0;
    core::LineView counts;  // without its line
    bool have_counts = false;
    bool reading = false;
    int presenting = 0;  // Present calls in flight
    int64_t next_keepalive_ms = 0;
    int64_t next_holder_check_ms = 0;
    bool holder_check_due = false;  // the line changed since slot holders were last asked
    // The delivery round (see the top of this file): sessions still to be shown in it.
    std::vector<std::string> round;
    size_t round_at = 0;
    int64_t round_started_ms = INT64_MIN / 2;
    int64_t line_read_ms = INT64_MIN / 2;
    bool dirty = false;        // what a client is shown may have changed since the round started
    size_t check_ins_due = 0;  // sessions marked check_in_now (an upper bound: some may be gone)
    int64_t silence_bound_ms = 0;  // given to every stream of the room; 0 until counts are read
    bool in_round() const { return round_at < round.size(); }
  };
  struct Delivery {
    std::shared_ptr<LiveStream> stream;
    std::string message;
    bool finish = false;  // close after the message
    // Nonzero: LiveStream::BoundSilence(silence_bound) first (the room's check-in limit).
    std::chrono::milliseconds silence_bound{0};
  };
  // Messages grouped by the streams' threads (a handful, so a short list): one hand-off per
  // thread per flush.
  struct Outbox {
    std::vector<std::pair<boost::asio::io_context*, std::vector<Delivery>>> by_thread;
    std::vector<Delivery>& For(boost::asio::io_context* context) {
      for (auto& [c, deliveries] : by_thread) {
        if (c == context) return deliveries;
      }
      return by_thread.emplace_back(context, std::vector<Delivery>()).second;
    }
    bool empty() const { return by_thread.empty(); }
  };

  void Tick();
  void Arm();
  void OnLine(const std::string& room, OpResult<core::LineView> result);
  void CheckIn(const std::string& room, RoomWatch& rw, bool everyone);
  void CheckInNow(RoomWatch& rw, Watch& w);  // in the next CheckIn
  void OnPresent(const std::string& room, OpResult<std::vector<core::SessionView>> result);
  // Shows the round's next chunk; starts a round when one is due.
  void Advance(const std::string& room, RoomWatch& rw, Outbox& out);
  void GoOn();
  // Queues `w`'s status for its streams when what it shows changed; true if queued.
  bool Show(const std::string& room, RoomWatch& rw, Watch& w, Outbox& out, int64_t now);
  Shown ShownFromLine(const RoomWatch& rw, const Watch& w) const;
  void EndWatch(Watch& w, Outbox& out);
  void EndRoom(const std::string& room, Outbox& out);
  void Detach(const std::string& room, const std::string& session, LiveStream* stream);
  void Flush(Outbox& out);
  core::SessionView ViewFromLine(const RoomWatch& rw, const Watch& w) const;
  int64_t KeepaliveEveryMs(const core::LineView& counts) const;
  // Streams of the room are told when its presence limit changed (or was first read).
  void BoundStreams(RoomWatch& rw, Outbox& out);
  // Runs fn on home_ unless the hub is gone by then.
  template <typename Fn>
  void Home(Fn&& fn);

  store::Backend& backend_;
  const core::TokenSigner& signer_;
  const Clock& clock_;
  boost::asio::io_context& home_;
  LiveHubOptions options_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  std::unordered_map<std::string, RoomWatch> rooms_;  // on home_ only
  std::atomic<size_t> streams_{0};
  // Flushes (one batch per thread each) posted and not yet written (any thread); a tick waits
  // while more than one is, and runs when they are down to one.
  std::shared_ptr<std::atomic<int>> flushes_ = std::make_shared<std::atomic<int>>(0);
  bool tick_deferred_ = false;                                  // on home_
  bool go_on_posted_ = false;                                   // on home_
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // completions after ~LiveHub
};

}  // namespace anteroom::server
