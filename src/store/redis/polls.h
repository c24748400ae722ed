#pragma once
// Long polls parked in this process, per queue, in the order they started waiting. Private to
// src/store/redis/.

#include <boost/asio/steady_timer.hpp>

#include <list>
#include <memory>

#include "store/redis/redis_backend.h"

namespace anteroom::store::redis {

// A parked long poll. Invariant: `gone` is set when it leaves its queue's line (answered,
// timed out, dropped, or the backend stopping), and its hang-up is then cleared; a waiter whose
// client hung up is never answered with a job (jobs leased for it go back to the queue).
struct RedisBackend::Waiter {
  Waiter(boost::asio::io_context& io, std::string q, core::FetchRequest r, core::FetchAnswer a,
         int64_t d, Completion<core::FetchAnswer> c)
      : queue(std::move(q)),
        request(std::move(r)),
        answer(std::move(a)),
        deadline(d),
        done(std::move(c)),
        timer(io) {}
  bool hung_up() const { return request.hangup && request.hangup->happened(); }
  // Leaves the line: no timer, no hang-up callback (it holds a reference to this waiter).
  void Retire() {
    gone = true;
    timer.cancel();
    if (request.hangup) request.hangup->Clear();
  }
  std::string queue;
  core::FetchRequest request;  // its acks already done: `answer` holds their outcomes
  core::FetchAnswer answer;
  int64_t deadline;  // clock ms
  Completion<core::FetchAnswer> done;
  boost::asio::steady_timer timer;
  bool gone = false;  // home shard only
};

// Invariant: while `serving`, the fetch in flight is for the first waiter, and nothing but its
// answer takes that waiter out of the line.
struct RedisBackend::Polls {
  std::list<std::shared_ptr<Waiter>> waiters;
  bool serving = false;  // a fetch for the first waiter is in flight
  bool again = false;    // woken while serving: look once more when it returns
};

}  // namespace anteroom::store::redis
