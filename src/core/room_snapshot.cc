// Room snapshots: the state of core::Room written field by field, and read back into a room that
// behaves exactly like the original (same slab indices, same heap keys, same line order).
#include <algorithm>

#include "core/room.h"

namespace anteroom::core {

namespace {
// The layout's version, written first. Restore reads every version listed here, so a data
// directory written by an older anteroom still opens:
//   1: the layout below without `paused` and `target_url` (they read as not paused, unset).
//   2: adds, after admit_per_minute: u8 paused | u8 has target_url | [str target_url].
constexpr uint32_t kRoomFormat = 2;

void SaveOptional(ByteWriter& out, const std::optional<int64_t>& v) {
  out.PutBool(v.has_value());
  out.Put<int64_t>(v.value_or(0));
}

std::optional<int64_t> LoadOptional(ByteReader& in) {
  bool has = in.GetBool();
  int64_t v = in.Get<int64_t>();
  return has ? std::optional<int64_t>(v) : std::nullopt;
}
}  // namespace

void Room::Save(ByteWriter& out) const {
  out.Put(kRoomFormat);
  out.Put(config_.capacity);
  out.Put(config_.grace_ms);
  out.Put(config_.checkin_timeout_ms);
  SaveOptional(out, config_.idle_timeout_ms);
  SaveOptional(out, config_.admit_per_minute);
  out.PutBool(config_.paused);
  out.PutBool(config_.target_url.has_value());
  if (config_.target_url) out.PutString(*config_.target_url);
  out.Put(revocation_ttl_ms_);
  out.Put(now_);

  out.Put<uint64_t>(slab_.size());
  for (const Session& s : slab_) {
    out.PutString(s.id.view());
    out.Put(s.last_seen);
    out.Put(s.since);
    out.Put(s.admission);
    out.Put(s.status);
    out.PutBool(s.claimed);
  }
  out.Put<uint64_t>(free_.size());
  for (Index i : free_) out.Put(i);
  // Sorted, so equal rooms write equal bytes (the heap's layout depends on its history).
  std::vector<DeadlineHeap::Entry> heap = deadlines_.entries();
  std::sort(heap.begin(), heap.end(),
            [](const auto& a, const auto& b) { return a.member < b.member; });
  out.Put<uint64_t>(heap.size());
  for (const auto& e : heap) {
    out.Put(e.member);
    out.Put(e.key);
  }
  // The line in order: tickets are renumbered on load, only their order matters.
  std::vector<std::pair<Line::Ticket, Index>> waiting;
  waiting.reserve(line_.size());
  for (Index i = 0; i < slab_.size(); ++i) {
    if (slab_[i].status == SessionStatus::kWaiting) waiting.emplace_back(slab_[i].ticket, i);
  }
  std::sort(waiting.begin(), waiting.end());
  out.Put<uint64_t>(waiting.size());
  for (const auto& w : waiting) out.Put(w.second);

  out.Put(holders_);
  out.Put(admissions_);
  admitted_window_.Save(out);
  freed_window_.Save(out);
  out.Put(counters_.admitted_total);
  out.Put(counters_.dropped_total);
  out.Put(counters_.released_total);
  std::vector<std::pair<std::string_view, Revoked>> revoked(revoked_.begin(), revoked_.end());
  std::sort(revoked.begin(), revoked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  out.Put<uint64_t>(revoked.size());
  for (const auto& [id, r] : revoked) {
    out.PutString(id);
    out.Put(r.admission);
    out.Put(r.until);
  }
  out.Put<uint64_t>(revoked_order_.size());
  for (const auto& [until, id] : revoked_order_) {
    out.Put(until);
    out.PutString(id);
  }
}

bool Room::Restore(ByteReader& in) {
  uint32_t format = in.Get<uint32_t>();
  if (format < 1 || format > kRoomFormat) return false;
  Room& r = *this;
  r.config_.capacity = in.Get<int64_t>();
  r.config_.grace_ms = in.Get<int64_t>();
  r.config_.checkin_timeout_ms = in.Get<int64_t>();
  r.config_.idle_timeout_ms = LoadOptional(in);
  r.config_.admit_per_minute = LoadOptional(in);
  r.config_.paused = false;
  r.config_.target_url.reset();
  if (format >= 2) {
    r.config_.paused = in.GetBool();
    if (in.GetBool()) r.config_.target_url = in.GetString();
  }
  r.revocation_ttl_ms_ = in.Get<int64_t>();
  r.now_ = in.Get<int64_t>();
  if (in.failed() || !InRange(r.config_) || r.now_ < 0 || r.now_ > kLatestTimeMs ||
      r.revocation_ttl_ms_ < 0 || r.revocation_ttl_ms_ > kMaxDurationMs) {
    return false;
  }

  uint64_t n = in.GetCount(4 + 8 * 3 + 2);
  r.slab_.resize(n);
  for (Session& s : r.slab_) {
    s.id.Assign(in.GetView());
    s.last_seen = in.Get<int64_t>();
    s.since = in.Get<int64_t>();
    s.admission = in.Get<uint64_t>();
    s.status = in.Get<SessionStatus>();
    s.claimed = in.GetBool();
    if (s.status > SessionStatus::kGone) in.Fail();
  }
  uint64_t free_count = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < free_count; ++k) {
    Index i = in.Get<Index>();
    if (i >= n || r.slab_[i].status != SessionStatus::kGone) in.Fail();
    r.free_.push_back(i);
  }
  if (in.failed()) return false;
  for (Index i = 0; i < n; ++i) {
    if (r.slab_[i].status != SessionStatus::kGone) r.index_.insert(i);
  }
  uint64_t heap_count = in.GetCount(sizeof(Index) + 8);
  for (uint64_t k = 0; k < heap_count && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    uint64_t key = in.Get<uint64_t>();
    if (i >= n || r.deadlines_.Contains(i)) {
      in.Fail();
    } else {
      r.deadlines_.Set(i, key);
    }
  }
  uint64_t waiting = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < waiting && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    if (i >= n || r.slab_[i].status != SessionStatus::kWaiting) {
      in.Fail();
    } else {
      r.slab_[i].ticket = r.line_.PushBack(i);
    }
  }
  r.holders_ = in.Get<int64_t>();
  r.admissions_ = in.Get<uint64_t>();
  r.admitted_window_.Load(in);
  r.freed_window_.Load(in);
  r.counters_.admitted_total = in.Get<int64_t>();
  r.counters_.dropped_total = in.Get<int64_t>();
  r.counters_.released_total = in.Get<int64_t>();
  uint64_t revoked = in.GetCount(4 + 16);
  for (uint64_t k = 0; k < revoked && !in.failed(); ++k) {
    std::string id = in.GetString();
    uint64_t admission = in.Get<uint64_t>();
    int64_t until = in.Get<int64_t>();
    r.revoked_[std::move(id)] = Revoked{admission, until};
  }
  uint64_t order = in.GetCount(8 + 4);
  for (uint64_t k = 0; k < order && !in.failed(); ++k) {
    int64_t until = in.Get<int64_t>();
    r.revoked_order_.emplace_back(until, in.GetString());
  }
  return !in.failed() && static_cast<size_t>(r.waiting()) == waiting;
}

}  // namespace anteroom::core
