// Each record's writer beside its reader: what Encode writes, Decode reads back in the same
// order (the layouts are in change_record.h).
#include "store/memory/change_record.h"

#include "core/event_codec.h"

namespace anteroom::store {

void PutOptional(ByteWriter& w, const std::optional<int64_t>& v) {
  w.PutBool(v.has_value());
  if (v) w.Put(*v);
}

std::optional<int64_t> GetOptional(ByteReader& r) {
  if (!r.GetBool()) return std::nullopt;
  return r.Get<int64_t>();
}

void PutOptionalString(ByteWriter& w, const std::optional<std::string_view>& v) {
  w.PutBool(v.has_value());
  if (v) w.PutString(*v);
}

std::optional<std::string_view> GetOptionalView(ByteReader& r) {
  if (!r.GetBool()) return std::nullopt;
  return r.GetView();
}

std::optional<std::string> GetOptionalString(ByteReader& r) {
  if (auto v = GetOptionalView(r)) return std::string(*v);
  return std::nullopt;
}

// ---- room patch ----------------------------------------------------------------------------

void PutRoomPatch(ByteWriter& w, const core::RoomPatch& p) {
  PutOptional(w, p.capacity);
  PutOptional(w, p.grace_ms);
  PutOptional(w, p.checkin_timeout_ms);
  for (const auto* field : {&p.idle_timeout_ms, &p.admit_per_minute}) {
    w.PutBool(field->has_value());
    if (*field) PutOptional(w, **field);
  }
  w.PutBool(p.paused.has_value());
  if (p.paused) w.PutBool(*p.paused);
  w.PutBool(p.target_url.has_value());
  if (p.target_url) PutOptionalString(w, *p.target_url);
  for (const auto* field :
       {&p.joins_per_minute_per_client, &p.places_per_client, &p.challenge_difficulty}) {
    w.PutBool(field->has_value());
    if (*field) PutOptional(w, **field);
  }
  w.PutBool(p.gate.has_value());
  if (p.gate) PutOptionalString(w, *p.gate);
  w.PutBool(p.queueing_method.has_value());
  if (p.queueing_method) w.Put(static_cast<uint8_t>(*p.queueing_method));
  w.PutBool(p.include_active);
  w.PutBool(p.page.has_value());
  if (p.page) PutOptionalString(w, *p.page);
  w.PutBool(p.notify_at_position.has_value());
  if (p.notify_at_position) PutOptional(w, *p.notify_at_position);
}

core::RoomPatch GetRoomPatch(ByteReader& r) {
  core::RoomPatch p;
  p.capacity = GetOptional(r);
  p.grace_ms = GetOptional(r);
  p.checkin_timeout_ms = GetOptional(r);
  for (auto* field : {&p.idle_timeout_ms, &p.admit_per_minute}) {
    if (r.GetBool()) *field = GetOptional(r);
  }
  if (r.GetBool()) p.paused = r.GetBool();
  if (r.GetBool()) p.target_url = GetOptionalString(r);
  for (auto* field :
       {&p.joins_per_minute_per_client, &p.places_per_client, &p.challenge_difficulty}) {
    if (r.GetBool()) *field = GetOptional(r);
  }
  if (r.GetBool()) p.gate = GetOptionalString(r);
  if (r.GetBool()) {
    auto method = r.Get<uint8_t>();
    if (method > static_cast<uint8_t>(core::QueueingMethod::kQueueAll)) r.Fail();
    p.queueing_method = static_cast<core::QueueingMethod>(method);
  }
  p.include_active = r.GetBool();
  // Format 4's patches end here (record_format.h: fields are added at the end).
  if (!r.done() && r.GetBool()) p.page = GetOptionalString(r);
  // Format 5's end here.
  if (!r.done() && r.GetBool()) p.notify_at_position = GetOptional(r);
  return p;
}

// ---- rooms ---------------------------------------------------------------------------------

void CreateRoomRecord::Encode(ByteWriter& w) const {
  w.Put(incarnation);
  core::SaveSeed(w, seed);
  PutRoomPatch(w, patch);
}
bool CreateRoomRecord::Decode(ByteReader& r) {
  incarnation = r.Get<uint64_t>();
  seed = core::LoadSeed(r);
  patch = GetRoomPatch(r);
  return !r.failed();
}

void PutRoomRecord::Encode(ByteWriter& w) const { PutRoomPatch(w, patch); }
bool PutRoomRecord::Decode(ByteReader& r) {
  patch = GetRoomPatch(r);
  return !r.failed();
}

void CheckRecord::Encode(ByteWriter& w) const {
  w.PutString(session);
  w.PutString(client);
  w.PutString(pass);
}
bool CheckRecord::Decode(ByteReader& r) {
  session = r.GetView();
  client = r.GetView();
  pass = r.GetView();
  return !r.failed();
}

void PutEventRecord::Encode(ByteWriter& w) const {
  w.PutString(id);
  core::SaveEventSpec(w, spec);
}
bool PutEventRecord::Decode(ByteReader& r) {
  id = r.GetView();
  spec = core::LoadEventSpec(r);
  return !r.failed();
}

void DeleteEventRecord::Encode(ByteWriter& w) const { w.PutString(id); }
bool DeleteEventRecord::Decode(ByteReader& r) {
  id = r.GetView();
  return !r.failed();
}

void DrawSeedRecord::Encode(ByteWriter& w) const { core::SaveSeed(w, seed); }
bool DrawSeedRecord::Decode(ByteReader& r) {
  seed = core::LoadSeed(r);
  return !r.failed();
}

void DrawStepRecord::Encode(ByteWriter& w) const { w.Put(max); }
bool DrawStepRecord::Decode(ByteReader& r) {
  max = r.Get<uint64_t>();
  return !r.failed();
}

void AddPassesRecord::Encode(ByteWriter& w) const {
  w.Put<uint32_t>(static_cast<uint32_t>(passes.size()));
  for (const core::RoomPass& p : passes) {
    w.PutString(p.id);
    w.PutString(p.digest);
    w.Put(static_cast<uint8_t>(p.kind));
    w.Put(p.uses);
    PutOptional(w, p.expires_at);
  }
}
bool AddPassesRecord::Decode(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 10) return false;
  passes.resize(n);
  for (core::RoomPass& p : passes) {
    p.id = r.GetString();
    p.digest = r.GetString();
    auto kind = r.Get<uint8_t>();
    if (kind > static_cast<uint8_t>(core::PassKind::kFront)) r.Fail();
    p.kind = static_cast<core::PassKind>(kind);
    p.uses = r.Get<int64_t>();
    p.uses_left = p.uses;
    p.expires_at = GetOptional(r);
  }
  return !r.failed();
}

void RevokePassesRecord::Encode(ByteWriter& w) const { PutOptionalString(w, id); }
bool RevokePassesRecord::Decode(ByteReader& r) {
  id = GetOptionalView(r);
  return !r.failed();
}

void TouchRecord::Encode(ByteWriter& w) const { w.PutString(session); }
bool TouchRecord::Decode(ByteReader& r) {
  session = r.GetView();
  return !r.failed();
}

void LeaveRecord::Encode(ByteWriter& w) const {
  w.PutString(session);
  w.PutBool(final);
}
bool LeaveRecord::Decode(ByteReader& r) {
  session = r.GetView();
  final = r.GetBool();
  return !r.failed();
}

void EvictRecord::Encode(ByteWriter& w) const { w.PutString(session); }
bool EvictRecord::Decode(ByteReader& r) {
  session = r.GetView();
  return !r.failed();
}

void SeenExpiredRecord::Encode(ByteWriter& w) const {
  w.Put(static_cast<uint32_t>(expiries.size()));
  for (const Expiry& e : expiries) {
    w.Put(e.when);
    w.PutString(e.session);
  }
}
bool SeenExpiredRecord::Decode(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 12) r.Fail();  // each takes at least 12 bytes
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    int64_t when = r.Get<int64_t>();
    expiries.push_back({when, r.GetView()});
  }
  return !r.failed();
}

void PresentRecord::Encode(ByteWriter& w) const {
  w.Put(static_cast<uint32_t>(sessions.size()));
  for (std::string_view s : sessions) w.PutString(s);
}
bool PresentRecord::Decode(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 4) r.Fail();
  for (uint32_t i = 0; i < n && !r.failed(); ++i) sessions.push_back(r.GetView());
  return !r.failed();
}

// ---- queues --------------------------------------------------------------------------------

void PushRecord::Encode(ByteWriter& w) const {
  w.Put<uint32_t>(static_cast<uint32_t>(jobs.size()));
  for (const auto& job : jobs) {
    w.PutString(job.payload);
    w.Put(job.delay_ms);
    w.Put(job.priority);
    w.PutBool(job.dedupe_key.has_value());
    if (job.dedupe_key) w.PutString(*job.dedupe_key);
    w.Put(job.max_attempts);
  }
  // Groups (format 7) at the end, and only when a job has one (or dependencies follow):
  // u32 n | n x (u32 job, str group). Then dependencies (format 9), only when a job has some:
  // u32 n | n x (u32 job, u8 ignore failed, u32 k, k x u64 id).
  // Then batches (format 9), only when a job joins one: u32 n | n x (u32 job, str batch).
  uint32_t grouped = 0, waiting = 0, batched = 0;
  for (const auto& job : jobs) {
    grouped += job.group.empty() ? 0 : 1;
    waiting += job.depends_on.empty() ? 0 : 1;
    batched += job.batch.empty() ? 0 : 1;
  }
  if (grouped == 0 && waiting == 0 && batched == 0) return;
  w.Put(grouped);
  for (uint32_t k = 0; k < jobs.size(); ++k) {
    if (jobs[k].group.empty()) continue;
    w.Put(k);
    w.PutString(jobs[k].group);
  }
  if (waiting == 0 && batched == 0) return;
  w.Put(waiting);
  for (uint32_t k = 0; k < jobs.size(); ++k) {
    if (jobs[k].depends_on.empty()) continue;
    w.Put(k);
    w.PutBool(jobs[k].ignore_failed_dependencies);
    w.Put<uint32_t>(static_cast<uint32_t>(jobs[k].depends_on.size()));
    for (core::JobId id : jobs[k].depends_on) w.Put(id);
  }
  if (batched == 0) return;
  w.Put(batched);
  for (uint32_t k = 0; k < jobs.size(); ++k) {
    if (jobs[k].batch.empty()) continue;
    w.Put(k);
    w.PutString(jobs[k].batch);
  }
}
bool PushRecord::Decode(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 21) r.Fail();  // the smallest job takes 21 bytes
  decoded.resize(r.failed() ? 0 : n);
  for (auto& job : decoded) {
    job.payload = r.GetString();
    job.delay_ms = r.Get<int64_t>();
    job.priority = r.Get<int32_t>();
    if (r.GetBool()) job.dedupe_key = r.GetString();
    job.max_attempts = r.Get<int32_t>();
  }
  if (!r.failed() && r.remaining() > 0) {
    uint32_t grouped = r.Get<uint32_t>();
    if (grouped > decoded.size()) r.Fail();
    for (uint32_t k = 0; k < grouped && !r.failed(); ++k) {
      uint32_t at = r.Get<uint32_t>();
      std::string group = r.GetString();
      if (at >= decoded.size() || group.empty() || group.size() > core::kMaxGroupBytes ||
          !decoded[at].group.empty()) {
        r.Fail();
      } else {
        decoded[at].group = std::move(group);
      }
    }
  }
  if (!r.failed() && r.remaining() > 0) {
    uint32_t waiting = r.Get<uint32_t>();
    if (waiting > decoded.size()) r.Fail();
    for (uint32_t k = 0; k < waiting && !r.failed(); ++k) {
      uint32_t at = r.Get<uint32_t>();
      bool ignore = r.GetBool();
      uint32_t n = r.Get<uint32_t>();
      if (at >= decoded.size() || n == 0 || n > core::kMaxDependencies ||
          !decoded[at].depends_on.empty() || n > r.remaining() / 8) {
        r.Fail();
        break;
      }
      decoded[at].ignore_failed_dependencies = ignore;
      for (uint32_t d = 0; d < n; ++d) decoded[at].depends_on.push_back(r.Get<uint64_t>());
    }
  }
  if (!r.failed() && r.remaining() > 0) {
    uint32_t batched = r.Get<uint32_t>();
    if (batched > decoded.size()) r.Fail();
    for (uint32_t k = 0; k < batched && !r.failed(); ++k) {
      uint32_t at = r.Get<uint32_t>();
      std::string batch = r.GetString();
      if (at >= decoded.size() || batch.empty() || !decoded[at].batch.empty()) {
        r.Fail();
      } else {
        decoded[at].batch = std::move(batch);
      }
    }
  }
  jobs = decoded;
  return !r.failed();
}

void FetchRecord::Encode(ByteWriter& w) const {
  w.PutString(worker);
  w.Put(max);
  w.Put(lease_ms);
}
bool FetchRecord::Decode(ByteReader& r) {
  worker = r.GetView();
  max = r.Get<uint64_t>();
  lease_ms = r.Get<int64_t>();
  return !r.failed();
}

void ReclaimRecord::Encode(ByteWriter& w) const {
  w.PutString(worker);
  w.Put(max);
  w.Put(lease_ms);
}
bool ReclaimRecord::Decode(ByteReader& r) {
  worker = r.GetView();
  max = r.Get<uint64_t>();
  lease_ms = r.Get<int64_t>();
  return !r.failed();
}

void LeaseList::Encode(ByteWriter& w) const {
  w.Put<uint32_t>(static_cast<uint32_t>(leases.size()));
  for (const auto& l : leases) {
    w.Put(l.id);
    w.Put(l.delivery);
  }
}
bool LeaseList::Decode(ByteReader& r) {
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 16) r.Fail();
  decoded.resize(r.failed() ? 0 : n);
  for (auto& l : decoded) {
    l.id = r.Get<uint64_t>();
    l.delivery = r.Get<uint64_t>();
  }
  leases = decoded;
  return !r.failed();
}

void AckRecord::Encode(ByteWriter& w) const {
  acked.Encode(w);
  bool any = false;
  for (std::string_view r : results) any = any || !r.empty();
  if (!any) return;
  w.Put<uint32_t>(static_cast<uint32_t>(results.size()));
  for (std::string_view r : results) w.PutString(r);
}
bool AckRecord::Decode(ByteReader& r) {
  if (!acked.Decode(r)) return false;
  if (r.remaining() == 0) return true;
  uint32_t n = r.Get<uint32_t>();
  if (n != acked.leases.size() || n > r.remaining() / 4) r.Fail();
  results.resize(r.failed() ? 0 : n);
  for (std::string_view& v : results) v = r.GetView();
  return !r.failed();
}

namespace {
void PutCallback(ByteWriter& w, const std::optional<core::JobSpec>& spec) {
  w.PutBool(spec.has_value());
  if (!spec) return;
  w.PutString(spec->payload);
  w.Put(spec->delay_ms);
  w.Put(spec->priority);
  PutOptionalString(w, spec->dedupe_key);
  w.Put(spec->max_attempts);
  w.PutString(spec->group);
}
bool GetCallback(ByteReader& r, std::optional<core::JobSpec>& spec) {
  if (!r.GetBool()) return !r.failed();
  core::JobSpec s;
  s.payload = r.GetString();
  s.delay_ms = r.Get<int64_t>();
  s.priority = r.Get<int32_t>();
  if (r.GetBool()) s.dedupe_key = r.GetString();
  s.max_attempts = r.Get<int32_t>();
  s.group = r.GetString();
  if (s.delay_ms < 0 || s.max_attempts < 1 || s.max_attempts > core::kMaxMaxAttempts ||
      s.group.size() > core::kMaxGroupBytes) {
    r.Fail();
  }
  spec = std::move(s);
  return !r.failed();
}
}  // namespace

void CreateBatchRecord::Encode(ByteWriter& w) const {
  w.PutString(id);
  PutCallback(w, spec.on_success);
  PutCallback(w, spec.on_complete);
  PutCallback(w, spec.on_dead);
}
bool CreateBatchRecord::Decode(ByteReader& r) {
  id = r.GetView();
  return GetCallback(r, spec.on_success) && GetCallback(r, spec.on_complete) &&
         GetCallback(r, spec.on_dead) && !id.empty();
}

void SetProgressRecord::Encode(ByteWriter& w) const {
  w.Put(lease.id);
  w.Put(lease.delivery);
  w.PutString(progress);
}
bool SetProgressRecord::Decode(ByteReader& r) {
  lease.id = r.Get<uint64_t>();
  lease.delivery = r.Get<uint64_t>();
  progress = r.GetView();
  return !r.failed();
}

void AppendJobLogRecord::Encode(ByteWriter& w) const {
  w.Put(lease.id);
  w.Put(lease.delivery);
  w.Put<uint32_t>(static_cast<uint32_t>(lines.size()));
  for (std::string_view line : lines) w.PutString(line);
}
bool AppendJobLogRecord::Decode(ByteReader& r) {
  lease.id = r.Get<uint64_t>();
  lease.delivery = r.Get<uint64_t>();
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 4) r.Fail();
  lines.resize(r.failed() ? 0 : n);
  for (std::string_view& v : lines) v = r.GetView();
  return !r.failed();
}

void NackRecord::Encode(ByteWriter& w) const {
  nacked.Encode(w);
  PutOptional(w, delay_ms);
  w.PutString(error);
}
bool NackRecord::Decode(ByteReader& r) {
  nacked.Decode(r);
  delay_ms = GetOptional(r);
  error = r.GetView();
  return !r.failed();
}

void SnoozeRecord::Encode(ByteWriter& w) const {
  snoozed.Encode(w);
  w.Put(delay_ms);
}
bool SnoozeRecord::Decode(ByteReader& r) {
  snoozed.Decode(r);
  delay_ms = r.Get<int64_t>();
  return !r.failed();
}

void SetQueueSettingsRecord::Encode(ByteWriter& w) const {
  core::SaveLimits(w, settings.limits);
  w.Put(settings.keep_acked.count);
  w.Put(settings.keep_acked.age_ms);
}
bool SetQueueSettingsRecord::Decode(ByteReader& r) {
  if (!core::LoadLimits(r, settings.limits)) return false;
  if (r.remaining() == 0) return true;
  settings.keep_acked.count = r.Get<int64_t>();
  settings.keep_acked.age_ms = r.Get<int64_t>();
  const core::KeepFinished& k = settings.keep_acked;
  return !r.failed() && k.count >= 0 && k.count <= core::kMaxKeepCount && k.age_ms >= 0 &&
         k.age_ms <= core::kMaxKeepAgeMs;
}

void FireScheduleRecord::Encode(ByteWriter& w) const {
  core::SaveSchedule(w, schedule);
  w.Put<uint32_t>(static_cast<uint32_t>(runs.size()));
  for (int64_t t : runs) w.Put(t);
}
bool FireScheduleRecord::Decode(ByteReader& r) {
  if (!core::LoadSchedule(r, schedule)) return false;
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 8 || n > core::kMaxCatchup) r.Fail();
  runs.resize(r.failed() ? 0 : n);
  for (int64_t& t : runs) t = r.Get<int64_t>();
  return !r.failed();
}

void ExtendRecord::Encode(ByteWriter& w) const {
  extended.Encode(w);
  w.Put(lease_ms);
}
bool ExtendRecord::Decode(ByteReader& r) {
  extended.Decode(r);
  lease_ms = r.Get<int64_t>();
  return !r.failed();
}

void HeartbeatRecord::Encode(ByteWriter& w) const {
  w.PutString(worker);
  w.Put(ttl_ms);
}
bool HeartbeatRecord::Decode(ByteReader& r) {
  worker = r.GetView();
  ttl_ms = r.Get<int64_t>();
  return !r.failed();
}

void ReleaseWorkerRecord::Encode(ByteWriter& w) const { w.PutString(worker); }
bool ReleaseWorkerRecord::Decode(ByteReader& r) {
  worker = r.GetView();
  return !r.failed();
}

void RequeueDeadRecord::Encode(ByteWriter& w) const {
  w.PutBool(all);
  w.Put<uint32_t>(static_cast<uint32_t>(ids.size()));
  for (core::JobId id : ids) w.Put(id);
}
bool RequeueDeadRecord::Decode(ByteReader& r) {
  all = r.GetBool();
  uint32_t n = r.Get<uint32_t>();
  if (n > r.remaining() / 8) r.Fail();
  decoded.resize(r.failed() ? 0 : n);
  for (auto& id : decoded) id = r.Get<core::JobId>();
  ids = decoded;
  return !r.failed();
}

void CancelRecord::Encode(ByteWriter& w) const { w.Put(id); }
bool CancelRecord::Decode(ByteReader& r) {
  id = r.Get<core::JobId>();
  return !r.failed();
}

void SetPausedRecord::Encode(ByteWriter& w) const { w.PutBool(paused); }
bool SetPausedRecord::Decode(ByteReader& r) {
  paused = r.GetBool();
  return !r.failed();
}

void SetQueueKeyRecord::Encode(ByteWriter& w) const { PutOptionalString(w, digest); }
bool SetQueueKeyRecord::Decode(ByteReader& r) {
  digest = GetOptionalView(r);
  return !r.failed();
}

void SetConfigRecord::Encode(ByteWriter& w) const {
  w.PutString(kind);
  PutOptionalString(w, value);
}
bool SetConfigRecord::Decode(ByteReader& r) {
  kind = r.GetView();
  value = GetOptionalView(r);
  return !r.failed();
}

// ---- the head ------------------------------------------------------------------------------

bool DecodeHead(ByteReader& r, ChangeHead& head) {
  head.kind = r.Get<ChangeKind>();
  head.now_ms = r.Get<int64_t>();
  head.name = r.GetView();
  return !r.failed();
}

}  // namespace anteroom::store
