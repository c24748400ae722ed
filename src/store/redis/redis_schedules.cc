// Schedules of repeatable jobs on Redis (core/job_schedule.h).
#include "store/redis/redis_backend.h"

namespace anteroom::store::redis {

namespace {
template <typename T>
void NotYet(Completion<T>& done) {
  done(OpResult<T>(OpStatus::kUnavailable, "schedules are not kept on Redis yet"));
}
}  // namespace

void RedisBackend::PutSchedule(std::string, core::ScheduleSpec, Completion<core::Schedule> done) {
  NotYet(done);
}
void RedisBackend::GetSchedule(std::string, Completion<core::Schedule> done) { NotYet(done); }
void RedisBackend::ListSchedules(Completion<std::vector<core::Schedule>> done) { NotYet(done); }
void RedisBackend::PauseSchedule(std::string, bool, Completion<core::Schedule> done) {
  NotYet(done);
}
void RedisBackend::DeleteSchedule(std::string, Completion<core::Schedule> done) { NotYet(done); }

}  // namespace anteroom::store::redis
