// Schedules of repeatable jobs in the memory backend (core/job_schedule.h).
#include "store/memory/memory_slots.h"

namespace anteroom::store {

namespace {
template <typename T>
void NotYet(Completion<T>& done) {
  done(OpResult<T>(OpStatus::kUnavailable, "schedules are not kept yet"));
}
}  // namespace

void MemoryBackend::PutSchedule(std::string, core::ScheduleSpec, Completion<core::Schedule> done) {
  NotYet(done);
}
void MemoryBackend::GetSchedule(std::string, Completion<core::Schedule> done) { NotYet(done); }
void MemoryBackend::ListSchedules(Completion<std::vector<core::Schedule>> done) { NotYet(done); }
void MemoryBackend::PauseSchedule(std::string, bool, Completion<core::Schedule> done) {
  NotYet(done);
}
void MemoryBackend::DeleteSchedule(std::string, Completion<core::Schedule> done) { NotYet(done); }

}  // namespace anteroom::store
