#pragma once
// A deliberately simple reference model of one waiting room: a vector of sessions, a vector
// for the line, vectors of event times, and linear scans for everything. It shares no data
// structure with core::Room (no Fenwick tree, no heap, no lazy deadlines, no bucketed window),
// so agreement between the two is evidence that the fast structures are right.
//
// Semantics mirrored from src/core/room.h: every deadline is processed at its own time, in
// (time, kind) order, drop-outs of waiting sessions first at equal times; the line is refilled
// after every event (unless the room is paused); an event whose time has already passed happens
// "now". While paused nobody is admitted and waiting sessions have no ETA.
//
// Per-client limits, written the other way round from core::Room (which keeps a debt per
// client and forgets clients by a heap): here a bucket is a level of tokens (1 token = 60,000
// units, refilled at `rate` units per ms up to rate tokens), places are counted from the
// sessions, and "the clients the room knows" is a predicate evaluated by scanning everything.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/op_status.h"
#include "core/room_types.h"

namespace anteroom::testing {

class ReferenceRoom {
 public:
  using Status = core::SessionStatus;
  struct Session {
    std::string id;
    Status status = Status::kWaiting;
    int64_t last_seen = 0;
    int64_t since = 0;
    uint64_t admission = 0;
    bool claimed = false;
    std::string client;  // set for tracked joins only
    // The engine's slab slot: deadlines at the same moment and of the same kind go in slot
    // order there (core::DeadlineHeap), and the order can matter (a drop-out, then a fill that
    // admits someone whose own drop-out is due at that moment). Slots are reused last freed
    // first, new ones appended, as core::Room does.
    uint32_t slot = 0;
  };
  struct Result {
    bool unknown_session = false;
    core::SessionView view;
  };
  // A check with an arrival: refused (status, retry) or answered.
  struct ArrivalResult {
    OpStatus status = OpStatus::kOk;
    int64_t retry_after_ms = 0;
    core::SessionView view;
  };

  ReferenceRoom(core::RoomConfig config, int64_t ttl, int64_t now)
      : config_(config), ttl_(ttl), now_(now) {}

  Result Check(const std::string& id, int64_t now) {
    Advance(now);
    Session* s = Find(id);
    if (s == nullptr) {
      sessions_.push_back(Session{id, Status::kWaiting, now_, 0, 0, false, {}, NewSlot()});
      line_.push_back(id);
      Fill(now_);
      s = Find(id);
    }
    s->last_seen = now_;
    if (s->status == Status::kActive || s->status == Status::kGrace) {
      s->status = Status::kActive;
      s->claimed = true;
    }
    return {false, View(*s)};
  }

  ArrivalResult Check(const std::string& id, const core::Arrival& arrival, int64_t now) {
    Advance(now);
    if (Find(id) == nullptr) {
      if (config_.challenge_difficulty && arrival.proof_bits < *config_.challenge_difficulty) {
        return {OpStatus::kChallengeRequired, 0, {}};
      }
      bool tracked = !arrival.client.empty() &&
                     (config_.joins_per_minute_per_client || config_.places_per_client);
      if (tracked) {
        const std::string& c = arrival.client;
        if (!Known(c) && KnownClients() >= max_clients_) {
          return {OpStatus::kRateLimited, 60'000, {}};
        }
        if (config_.places_per_client && Places(c) >= *config_.places_per_client) {
          return {OpStatus::kRateLimited, std::max<int64_t>(config_.checkin_timeout_ms, 1'000), {}};
        }
        if (config_.joins_per_minute_per_client && Level(c) < kTokenUnits) {
          int64_t rate = *config_.joins_per_minute_per_client;
          return {OpStatus::kRateLimited, (kTokenUnits - Level(c) + rate - 1) / rate, {}};
        }
        if (config_.joins_per_minute_per_client) buckets_[c] = {Level(c) - kTokenUnits, now_};
      }
      Result r = Check(id, now_);
      Find(id)->client = tracked ? arrival.client : std::string();
      return {OpStatus::kOk, 0, r.view};
    }
    return {OpStatus::kOk, 0, Check(id, now_).view};
  }

  void set_max_clients(size_t n) { max_clients_ = n; }
  // Clients holding a place, or whose bucket is not full.
  size_t KnownClients() const {
    std::map<std::string, bool> names;
    for (const Session& s : sessions_) {
      if (!s.client.empty()) names[s.client] = true;
    }
    for (const auto& [name, bucket] : buckets_) names[name] = true;
    return std::count_if(names.begin(), names.end(), [&](const auto& n) { return Known(n.first); });
  }
  int64_t Places(const std::string& client) const {
    return std::count_if(sessions_.begin(), sessions_.end(),
                         [&](const Session& s) { return s.client == client; });
  }

  Result Touch(const std::string& id, int64_t now) {
    Advance(now);
    Session* s = Find(id);
    if (s == nullptr) return {true, {}};
    s->last_seen = now_;
    if (s->status == Status::kGrace) s->status = Status::kActive;
    return {false, View(*s)};
  }

  Result Leave(const std::string& id, bool final, int64_t now) {
    Advance(now);
    Session* s = Find(id);
    if (s == nullptr) return {true, {}};
    if (s->status == Status::kWaiting) {
      RemoveWaiting(id);
      return {false, Gone(id)};
    }
    if (final) {
      Release(id, now_, false);
      Fill(now_);
      return {false, Gone(id)};
    }
    if (s->status == Status::kActive) {
      s->status = Status::kGrace;
      s->since = now_ + config_.grace_ms;
    }
    return {false, View(*s)};
  }

  Result Evict(const std::string& id, int64_t now) {
    Advance(now);
    Session* s = Find(id);
    if (s == nullptr) return {true, {}};
    if (s->status == Status::kWaiting) {
      RemoveWaiting(id);
    } else {
      Release(id, now_, false);
      Fill(now_);
    }
    return {false, Gone(id)};
  }

  bool IsRevoked(const std::string& id, uint64_t admission, int64_t now) {
    Advance(now);
    auto it = revoked_.find(id);
    return it != revoked_.end() && it->second.second > now_ && admission <= it->second.first;
  }

  void Reconfigure(const core::RoomPatch& patch, int64_t now) {
    Advance(now);
    if (patch.joins_per_minute_per_client &&
        *patch.joins_per_minute_per_client != config_.joins_per_minute_per_client) {
      buckets_.clear();  // a new rate: every bucket full
    }
    patch.ApplyTo(config_);
    Fill(now_);
  }

  void Advance(int64_t target) {
    target = std::max(target, now_);
    while (true) {
      // The earliest event: a session deadline, or the moment the rate cap lets one more in.
      std::optional<int64_t> best_time;
      int best_kind = 2;
      const Session* best = nullptr;
      for (const Session& s : sessions_) {
        auto [t, kind] = Deadline(s);
        if (!t) continue;
        if (!best_time || *t < *best_time || (*t == *best_time && kind < best_kind) ||
            (*t == *best_time && kind == best_kind && s.slot < best->slot)) {
          best_time = t;
          best_kind = kind;
          best = &s;
        }
      }
      std::optional<int64_t> rate_open = RateOpenTime();
      if (rate_open && (!best_time || *rate_open < *best_time)) {
        // At equal times session deadlines go first (drop-outs must not be admitted).
        if (*rate_open > target) break;
        now_ = std::max(*rate_open, now_);
        Fill(now_);
        continue;
      }
      if (!best_time || *best_time > target) break;
      int64_t when = std::max(*best_time, now_);
      now_ = when;
      std::string id = best->id;
      Session& s = *Find(id);
      switch (s.status) {
        case Status::kWaiting:
          RemoveWaiting(id);
          ++counters_.dropped_total;
          break;
        case Status::kActive:
          // Which deadline it is follows from its own time, not the room's (later when a
          // reconfiguration moved it into the past): idle first, or the claim ran out.
          if (!s.claimed && s.since + config_.checkin_timeout_ms <= *best_time) {
            Release(id, when, true);
          } else {
            s.status = Status::kGrace;
            s.since = when + config_.grace_ms;
          }
          break;
        case Status::kGrace:
          Release(id, when, false);
          break;
        case Status::kGone:
        case Status::kPrequeue:  // launch day is not in this model (room_launch_test.cc)
        case Status::kClosed:
          break;
      }
      Fill(when);
    }
    now_ = target;
  }

  int64_t holders() const {
    return std::count_if(sessions_.begin(), sessions_.end(), [](const Session& s) {
      return s.status == Status::kActive || s.status == Status::kGrace;
    });
  }
  int64_t waiting() const { return static_cast<int64_t>(line_.size()); }
  const core::RoomCounters& counters() const { return counters_; }
  uint64_t admissions() const { return admissions_; }
  const core::RoomConfig& config() const { return config_; }

 private:
  static constexpr int64_t kTokenUnits = 60'000;
  struct Bucket {
    int64_t level;  // units
    int64_t at;
  };

  int64_t Level(const std::string& client) const {
    if (!config_.joins_per_minute_per_client) return INT64_MAX;
    int64_t rate = *config_.joins_per_minute_per_client;
    int64_t capacity = kTokenUnits * rate;
    auto it = buckets_.find(client);
    if (it == buckets_.end()) return capacity;
    return std::min(capacity, it->second.level + (now_ - it->second.at) * rate);
  }
  bool Known(const std::string& client) const {
    if (Places(client) > 0) return true;
    return config_.joins_per_minute_per_client &&
           Level(client) < kTokenUnits * *config_.joins_per_minute_per_client;
  }

  Session* Find(const std::string& id) {
    for (Session& s : sessions_) {
      if (s.id == id) return &s;
    }
    return nullptr;
  }

  std::pair<std::optional<int64_t>, int> Deadline(const Session& s) const {
    switch (s.status) {
      case Status::kWaiting:
        return {s.last_seen + config_.checkin_timeout_ms, 0};
      case Status::kActive: {
        std::optional<int64_t> t;
        if (config_.idle_timeout_ms) t = s.last_seen + *config_.idle_timeout_ms;
        if (!s.claimed) {
          int64_t claim = s.since + config_.checkin_timeout_ms;
          t = t ? std::min(*t, claim) : claim;
        }
        return {t, 1};
      }
      case Status::kGrace:
        return {s.since, 1};
      case Status::kGone:
      case Status::kPrequeue:  // launch day is not in this model (room_launch_test.cc)
      case Status::kClosed:
        break;
    }
    return {std::nullopt, 1};
  }

  // Admissions counted over the current whole second and the 59 before it.
  int64_t AdmittedInWindow(int64_t t) const {
    int64_t sec = t / 1000;
    return std::count_if(admitted_at_.begin(), admitted_at_.end(),
                         [&](int64_t a) { return a / 1000 > sec - 60 && a / 1000 <= sec; });
  }

  std::optional<int64_t> RateOpenTime() const {
    if (config_.paused || !config_.admit_per_minute || line_.empty() ||
        holders() >= config_.capacity) {
      return std::nullopt;
    }
    std::vector<int64_t> candidates{now_};
    for (int64_t a : admitted_at_) candidates.push_back((a / 1000 + 60) * 1000);
    std::sort(candidates.begin(), candidates.end());
    for (int64_t c : candidates) {
      if (c >= now_ && AdmittedInWindow(c) < *config_.admit_per_minute) return c;
    }
    return std::nullopt;
  }

  void Fill(int64_t now) {
    if (config_.paused) return;
    while (!line_.empty() && holders() < config_.capacity) {
      if (config_.admit_per_minute && AdmittedInWindow(now) >= *config_.admit_per_minute) return;
      std::string id = line_.front();
      line_.erase(line_.begin());
      Session& s = *Find(id);
      s.status = Status::kActive;
      s.claimed = false;
      s.since = now;
      s.last_seen = now;
      s.admission = ++admissions_;
      ++counters_.admitted_total;
      admitted_at_.push_back(now);
    }
  }

  void RemoveWaiting(const std::string& id) {
    line_.erase(std::find(line_.begin(), line_.end(), id));
    Erase(id);
  }

  void Release(const std::string& id, int64_t now, bool dropped) {
    ++counters_.released_total;
    if (dropped) ++counters_.dropped_total;
    freed_.Add(now);
    revoked_[id] = {Find(id)->admission, now + ttl_};
    Erase(id);
  }

  uint32_t NewSlot() {
    if (free_slots_.empty()) return next_slot_++;
    uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  void Erase(const std::string& id) {
    auto it = std::find_if(sessions_.begin(), sessions_.end(),
                           [&](const Session& s) { return s.id == id; });
    free_slots_.push_back(it->slot);
    sessions_.erase(it);
  }

  core::SessionView Base(const std::string& id) const {
    core::SessionView v;
    v.session = id;
    v.waiting = waiting();
    v.active = holders();
    v.capacity = config_.capacity;
    return v;
  }

  core::SessionView Gone(const std::string& id) const {
    core::SessionView v = Base(id);
    v.status = Status::kGone;
    return v;
  }

  core::SessionView View(const Session& s) const {
    core::SessionView v = Base(s.id);
    v.status = s.status;
    if (s.status == Status::kWaiting) {
      v.position = std::find(line_.begin(), line_.end(), s.id) - line_.begin() + 1;
      // The outflow as the core measures it (core/outflow_estimate.h, tested on its own).
      if (!config_.paused) {
        v.eta_ms = core::EtaMs(v.position, core::Flow{core::EstimateRate(freed_, now_), 0},
                               config_.admit_per_minute);
      }
    } else {
      v.admission = s.admission;
      v.eta_ms = 0;
    }
    return v;
  }

  core::RoomConfig config_;
  int64_t ttl_;
  int64_t now_;
  std::vector<Session> sessions_;
  std::vector<uint32_t> free_slots_;
  uint32_t next_slot_ = 0;
  std::vector<std::string> line_;
  std::vector<int64_t> admitted_at_;
  core::FlowHistory freed_;                                      // releases
  std::map<std::string, std::pair<uint64_t, int64_t>> revoked_;  // id -> (admission, until)
  uint64_t admissions_ = 0;
  core::RoomCounters counters_;
  std::map<std::string, Bucket> buckets_;
  size_t max_clients_ = core::kDefaultMaxClientsPerRoom;
};

}  // namespace anteroom::testing
