// Passes in core::Room (core/room_pass.h): kept as id and digest, redeemed with a check.
#include <openssl/crypto.h>

#include <algorithm>

#include "common/wire_errors.h"
#include "core/room.h"

namespace anteroom::core {

OpResult<Done> Room::AddPasses(std::vector<RoomPass> passes, int64_t now_ms) {
  Advance(now_ms);
  if (passes_.size() + passes.size() > kMaxPassesPerRoom) {
    return {OpStatus::kLimitReached, wire::TooManyPasses(kMaxPassesPerRoom)};
  }
  for (const RoomPass& p : passes) {
    if (passes_.contains(p.id)) return {OpStatus::kConflict, wire::PassIdTaken(p.id)};
  }
  for (RoomPass& p : passes) {
    std::string id = p.id;
    passes_.emplace(std::move(id), std::move(p));
  }
  return Done{};
}

std::vector<RoomPass> Room::Passes() const {
  std::vector<RoomPass> out;
  out.reserve(passes_.size());
  for (const auto& [id, p] : passes_) out.push_back(p);
  std::sort(out.begin(), out.end(), [](const RoomPass& a, const RoomPass& b) {
    return a.created_at != b.created_at ? a.created_at < b.created_at : a.id < b.id;
  });
  return out;
}

OpResult<int64_t> Room::RevokePasses(std::optional<std::string_view> id, int64_t now_ms) {
  Advance(now_ms);
  if (!id) {
    auto n = static_cast<int64_t>(passes_.size());
    passes_.clear();
    return n;
  }
  auto it = passes_.find(std::string(*id));
  if (it == passes_.end()) return {OpStatus::kNotFound, wire::UnknownPass(*id)};
  passes_.erase(it);
  return int64_t{1};
}

// The code finds its pass by id and proves itself by its digest (compared in constant time);
// a pass used up or past its time is refused as well. Nothing changes.
std::optional<OpResult<SessionView>> Room::PassRefusal(std::string_view code) const {
  auto refuse = [](std::string_view message) {
    return OpResult<SessionView>(OpStatus::kInvalidArgument, std::string(message));
  };
  if (code.size() > kMaxPassCodeBytes) return refuse(wire::kPassNotValid);
  auto it = passes_.find(std::string(PassIdOfCode(code)));
  if (it == passes_.end()) return refuse(wire::kPassNotValid);
  const RoomPass& p = it->second;
  std::string digest = PassDigest(code);
  if (digest.size() != p.digest.size() ||
      CRYPTO_memcmp(digest.data(), p.digest.data(), digest.size()) != 0) {
    return refuse(wire::kPassNotValid);
  }
  if (p.uses_left <= 0) return refuse(wire::kPassUsedUp);
  if (p.expires_at && now_ >= *p.expires_at) return refuse(wire::kPassExpired);
  return std::nullopt;
}

// One use of the pass: the session (joining if new) is admitted when a slot is free and the
// pass admits, else it goes to the end of the front line (ahead of everyone without a pass).
OpResult<SessionView> Room::UsePass(std::string_view id, std::string_view client,
                                    std::string_view pass_id) {
  RoomPass& pass = passes_.at(std::string(pass_id));
  --pass.uses_left;
  ++counters_.passes_used;
  ++checkin_changes_;
  Index i = Find(id);
  if (i == kNoIndex) {
    i = Join(id, now_);
    CountJoin(i, client);
  }
  Note(NoticeKind::kPassUsed, now_, i, std::string(pass_id));
  Session& s = slab_[i];
  s.last_seen = now_;
  if (s.status == SessionStatus::kWaiting || s.status == SessionStatus::kPrequeue) {
    Unline(i);
    s.drawn = false;  // a draw that holds it skips it (it is no longer in the pre-queue)
    s.status = SessionStatus::kWaiting;
    s.front = true;
    s.ticket = front_.PushBack(i);
    PrefixArrival(i, now_);
    ++version_;
    deadlines_.Set(i, DueKey(s));
    if (pass.kind == PassKind::kAdmit && holders_ < config_.capacity) Admit(i, now_);
    if (s.status == SessionStatus::kActive) s.claimed = true;  // it is here: it claimed it
  }
  Fill(now_);
  return View(i, now_);
}

OpResult<SessionView> Room::RedeemRecorded(std::string_view id, std::string_view client,
                                           std::string_view pass_id, int64_t now_ms) {
  Advance(now_ms);
  auto it = passes_.find(std::string(pass_id));
  if (it == passes_.end() || it->second.uses_left <= 0) {
    return {OpStatus::kInternal, "pass '" + std::string(pass_id) + "' cannot be used"};
  }
  return UsePass(id, client, pass_id);
}

}  // namespace anteroom::core
