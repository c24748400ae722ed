#pragma once
// How accurate the ETA this server answers turns out to be, measured while it runs (the
// dashboard's ETA-error chart; bench/eta_bench measures the same offline).
//
// EtaTracer follows a sample of waiting people: per room at most one new trace every
// `sample_every_ms`, started from a waiting answer this process wrote (a check, a touch: the
// time, the position and the `eta_ms` answered; in the random method `eta_ms` is the median of
// the odds, odds.p50_ms, compared the same way). A trace ends when its session is admitted: the
// actual wait is the admission's time less the trace's start, and |predicted - actual| / actual
// is kept for five minutes (waits under a second are not). A trace is dropped when its session
// leaves, is dropped, expires, is revoked or redeems a pass, when its room is deleted, and after
// `max_trace_ms`.
//
// Why admissions come from the lifecycle event stream, not from a later check answered
// "active": the event carries the admission's own time (a later check comes up to 10 s after, an
// error as large as short waits), it is seen whichever process admitted (Redis: every process
// reads the one stream) and whether or not the person checks again, and the same stream says
// when a session left or was dropped. EtaEventReader reads it for the tracer. A trace whose
// admission was read before the trace began (an admission landing between the backend's answer
// and this process writing it) stays open until the session's slot ends (left, expired,
// revoked: dropped then) or the cap: one lost sample, never a wrong one.
//
// Bounded against hostile traffic: at most `max_open_per_room` open traces per room, `max_rooms`
// rooms, `max_errors_per_room` errors kept per room. 56 bytes per open trace (plus a session id
// longer than 15 bytes), 16 per error kept, about 100 per room: with the defaults at most
// 64 x 56 + 256 x 16 bytes, about 8 KiB per room (one trace every 5 s keeps ~60 errors).
//
// The check path's cost: a waiting answer takes one mutex and one map lookup (most then stop:
// the room's next sample is not due); other answers take nothing.

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "core/room_types.h"
#include "server/event_follower.h"
#include "store/backend.h"
#include "store/lifecycle_event.h"

namespace anteroom::server {

struct EtaTracerOptions {
  int64_t sample_every_ms = 5'000;  // per room, at most one new trace this often (0: any)
  size_t max_open_per_room = 64;
  size_t max_rooms = 10'000;
  int64_t max_trace_ms = 2 * 3'600'000;  // a trace open longer is dropped
  int64_t min_actual_ms = 1'000;         // shorter waits are not scored
  int64_t window_ms = 5 * 60'000;        // errors are kept (and summarised) this long
  size_t max_errors_per_room = 256;
};

// The relative errors of the traces of one room that ended in the window: nearest-rank median
// and 90th percentile of |predicted - actual| / actual (0.25 = off by a quarter of the wait),
// nullopt when fewer than kMinCount ended.
struct EtaErrorSummary {
  static constexpr size_t kMinCount = 5;
  size_t count = 0;
  std::optional<double> p50, p90;
};

// Thread-safe: answers are noted from any I/O thread, events from the reader's.
class EtaTracer {
 public:
  explicit EtaTracer(const Clock& clock, EtaTracerOptions options = {});

  // A status this process answered for `room`: a waiting one with an ETA may start a trace.
  void OnAnswer(std::string_view room, const core::SessionView& v);
  // Events in order: admissions end traces, departures drop them.
  void OnEvents(const std::vector<store::LifecycleEvent>& events);
  // Drops traces past the cap, errors out of the window, and rooms left with neither.
  void Sweep();

  // The summary of every room with an error in the window (now), by name.
  std::map<std::string, EtaErrorSummary, std::less<>> Summaries() const;
  EtaErrorSummary Summary(std::string_view room) const;

  size_t open_traces() const;  // in every room
  size_t rooms() const;

 private:
  struct Trace {
    std::string session;
    int64_t start_ms = 0;
    int64_t predicted_ms = 0;
    int64_t position = 0;  // 0 in the random method
  };
  struct Error {
    int64_t at_ms = 0;
    float value = 0;
  };
  struct RoomTraces {
    int64_t next_start_ms = 0;  // no new trace before this
    std::vector<Trace> open;    // few (max_open_per_room): scanned
    std::deque<Error> errors;   // oldest first
  };
  using Rooms = std::map<std::string, RoomTraces, std::less<>>;

  void OnEvent(const store::LifecycleEvent& e);  // under mu_
  EtaErrorSummary SummaryOf(const RoomTraces& r, int64_t now) const;

  const Clock& clock_;
  const EtaTracerOptions options_;
  mutable std::mutex mu_;
  Rooms rooms_;  // guarded by mu_
  std::atomic<size_t> open_ = 0;
};

struct EtaEventReaderOptions {
  std::chrono::milliseconds poll{1'000};  // reads at least this often (Redis: other processes)
  size_t batch = 1'000;
};

// Reads the lifecycle events into a tracer, from the newest on: woken when this process adds
// events, and every poll interval. While no trace is open it only moves its position to the
// newest event, reading none. Start and Stop on any thread; it runs on `io`.
class EtaEventReader {
 public:
  EtaEventReader(store::Backend& backend, boost::asio::io_context& io, EtaTracer& tracer,
                 EtaEventReaderOptions options = {});
  ~EtaEventReader();
  EtaEventReader(const EtaEventReader&) = delete;
  EtaEventReader& operator=(const EtaEventReader&) = delete;

  void Start();
  void Stop();

 private:
  void Step();  // on io (EventFollower runs it)

  store::Backend& backend_;
  boost::asio::io_context& io_;
  EtaTracer& tracer_;
  EtaEventReaderOptions options_;
  // On io.
  std::optional<store::EventId> after_;
  EventFollower follower_;  // last: it runs Step until it is destroyed
};

}  // namespace anteroom::server
