#include "store/memory/change_record.h"

namespace anteroom::store {

void PutOptional(ByteWriter& w, const std::optional<int64_t>& v) {
  w.PutBool(v.has_value());
  if (v) w.Put(*v);
}

std::optional<int64_t> GetOptional(ByteReader& r) {
  if (!r.GetBool()) return std::nullopt;
  return r.Get<int64_t>();
}

void PutOptionalString(ByteWriter& w, const std::optional<std::string>& v) {
  w.PutBool(v.has_value());
  if (v) w.PutString(*v);
}

std::optional<std::string> GetOptionalString(ByteReader& r) {
  if (!r.GetBool()) return std::nullopt;
  return r.GetString();
}

// Each field: u8 named, then (for those that can be cleared) u8 has-value, then the value.
// Format 1 (kPutRoom) ends after admit_per_minute; format 2 (kPutRoom2) adds paused
// (u8 named [u8 value]) and target_url (u8 named [u8 has-value [str]]); format 3 (kPutRoom3)
// adds joins_per_minute_per_client, places_per_client and challenge_difficulty (each u8 named
// [u8 has-value [i64]]); format 4 (kPutRoom4) adds gate (u8 named [u8 has-value [str]]).
void PutRoomPatch(ByteWriter& w, const core::RoomPatch& p, ChangeKind kind) {
  PutOptional(w, p.capacity);
  PutOptional(w, p.grace_ms);
  PutOptional(w, p.checkin_timeout_ms);
  w.PutBool(p.idle_timeout_ms.has_value());
  if (p.idle_timeout_ms) PutOptional(w, *p.idle_timeout_ms);
  w.PutBool(p.admit_per_minute.has_value());
  if (p.admit_per_minute) PutOptional(w, *p.admit_per_minute);
  if (kind == ChangeKind::kPutRoom) return;
  w.PutBool(p.paused.has_value());
  if (p.paused) w.PutBool(*p.paused);
  w.PutBool(p.target_url.has_value());
  if (p.target_url) {
    w.PutBool(p.target_url->has_value());
    if (*p.target_url) w.PutString(**p.target_url);
  }
  if (kind == ChangeKind::kPutRoom2) return;
  for (const auto* field :
       {&p.joins_per_minute_per_client, &p.places_per_client, &p.challenge_difficulty}) {
    w.PutBool(field->has_value());
    if (*field) PutOptional(w, **field);
  }
  if (kind == ChangeKind::kPutRoom3) return;
  w.PutBool(p.gate.has_value());
  if (p.gate) PutOptionalString(w, *p.gate);
}

core::RoomPatch GetRoomPatch(ByteReader& r, ChangeKind kind) {
  core::RoomPatch p;
  p.capacity = GetOptional(r);
  p.grace_ms = GetOptional(r);
  p.checkin_timeout_ms = GetOptional(r);
  if (r.GetBool()) p.idle_timeout_ms = GetOptional(r);
  if (r.GetBool()) p.admit_per_minute = GetOptional(r);
  if (kind == ChangeKind::kPutRoom) return p;
  if (r.GetBool()) p.paused = r.GetBool();
  if (r.GetBool()) {
    p.target_url.emplace();
    if (r.GetBool()) *p.target_url = r.GetString();
  }
  if (kind == ChangeKind::kPutRoom2) return p;
  for (auto* field :
       {&p.joins_per_minute_per_client, &p.places_per_client, &p.challenge_difficulty}) {
    if (r.GetBool()) *field = GetOptional(r);
  }
  if (kind == ChangeKind::kPutRoom3) return p;
  if (r.GetBool()) p.gate = GetOptionalString(r);
  return p;
}

void PutJobs(ByteWriter& w, const std::vector<core::JobSpec>& jobs) {
  w.Put<uint32_t>(static_cast<uint32_t>(jobs.size()));
  for (const auto& job : jobs) {
    w.PutString(job.payload);
    w.Put(job.delay_ms);
    w.Put(job.priority);
    w.PutBool(job.dedupe_key.has_value());
    if (job.dedupe_key) w.PutString(*job.dedupe_key);
    w.Put(job.max_attempts);
  }
}

std::vector<core::JobSpec> GetJobs(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 21) {  // the smallest job takes 21 bytes
    r.Fail();
    return {};
  }
  std::vector<core::JobSpec> jobs(n);
  for (auto& job : jobs) {
    job.payload = r.GetString();
    job.delay_ms = r.Get<int64_t>();
    job.priority = r.Get<int32_t>();
    if (r.GetBool()) job.dedupe_key = r.GetString();
    job.max_attempts = r.Get<int32_t>();
  }
  return jobs;
}

void PutLeases(ByteWriter& w, const std::vector<core::LeaseRef>& leases) {
  w.Put<uint32_t>(static_cast<uint32_t>(leases.size()));
  for (const auto& l : leases) {
    w.Put(l.id);
    w.Put(l.delivery);
  }
}

std::vector<core::LeaseRef> GetLeases(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 16) {
    r.Fail();
    return {};
  }
  std::vector<core::LeaseRef> leases(n);
  for (auto& l : leases) {
    l.id = r.Get<uint64_t>();
    l.delivery = r.Get<uint64_t>();
  }
  return leases;
}

}  // namespace anteroom::store
