// Config entries and roles of the embedded backend (store/backend.h ConfigEntry): a map under the
// config slot's lock, each change logged (SetConfigRecord) and answered once durable, as a room's.
#include <mutex>
#include <shared_mutex>

#include "store/memory/durable_answer.h"
#include "store/memory/memory_slots.h"

namespace anteroom::store {

void MemoryBackend::PutConfig(ConfigEntry entry, Completion<Done> done) {
  if (auto refusal = Refusal(Access::kChange)) {
    return done(OpResult<Done>(OpStatus::kUnavailable, std::move(*refusal)));
  }
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::lock_guard lock(config_->mu);
    if (Logging()) {
      EncodeChange(scratch_, clock_.NowMs(), entry.name,
                   SetConfigRecord{.kind = entry.kind, .value = entry.value});
      Log(*config_, scratch_);
    }
    config_->entries[{entry.kind, entry.name}] = entry.value;
    lsn = config_->last_lsn;
  }
  Answer<Done>(lsn, Access::kChange, std::move(done), Done{}, {});
}

void MemoryBackend::DeleteConfig(std::string kind, std::string name, Completion<bool> done) {
  if (auto refusal = Refusal(Access::kChange)) {
    return done(OpResult<bool>(OpStatus::kUnavailable, std::move(*refusal)));
  }
  uint64_t lsn = 0;
  bool found = false;
  {
    std::shared_lock world(world_);
    std::lock_guard lock(config_->mu);
    found = config_->entries.erase({kind, name}) > 0;
    if (found && Logging()) {
      EncodeChange(scratch_, clock_.NowMs(), name, SetConfigRecord{.kind = kind, .value = {}});
      Log(*config_, scratch_);
    }
    lsn = config_->last_lsn;
  }
  Answer<bool>(lsn, Access::kChange, std::move(done), found, {});
}

void MemoryBackend::ListConfig(std::string kind, Completion<std::vector<ConfigEntry>> done) {
  std::vector<ConfigEntry> out;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::lock_guard lock(config_->mu);
    for (auto it = config_->entries.lower_bound({kind, ""});
         it != config_->entries.end() && it->first.first == kind; ++it) {
      out.push_back({kind, it->first.second, it->second});
    }
    lsn = config_->last_lsn;
  }
  Answer<std::vector<ConfigEntry>>(lsn, Access::kRead, std::move(done), std::move(out), {});
}

void MemoryBackend::HoldRole(std::string role, std::string, int64_t,
                             Completion<std::optional<std::string>> done) {
  std::string position;
  {
    std::lock_guard lock(roles_mu_);
    position = role_positions_[role];
  }
  done(std::optional<std::string>(std::move(position)));
}

void MemoryBackend::SaveRolePosition(std::string role, std::string, std::string position,
                                     Completion<bool> done) {
  {
    std::lock_guard lock(roles_mu_);
    role_positions_[role] = std::move(position);
  }
  done(true);
}

}  // namespace anteroom::store
