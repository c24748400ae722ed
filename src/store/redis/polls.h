#pragma once
// Long polls parked in this process, per queue, in the order they started waiting. Private to
// src/store/redis/.

#include <boost/asio/steady_timer.hpp>

#include <list>
#include <memory>

#include "store/redis/redis_backend.h"

namespace anteroom::store::redis {

struct RedisBackend::Waiter {
  Waiter(boost::asio::io_context& io, core::FetchRequest r, core::FetchAnswer a, int64_t d,
         Completion<core::FetchAnswer> c)
      : request(std::move(r)), answer(std::move(a)), deadline(d), done(std::move(c)), timer(io) {}
  core::FetchRequest request;  // its acks already done: `answer` holds their outcomes
  core::FetchAnswer answer;
  int64_t deadline;  // clock ms
  Completion<core::FetchAnswer> done;
  boost::asio::steady_timer timer;
};

struct RedisBackend::Polls {
  std::list<std::shared_ptr<Waiter>> waiters;
  bool serving = false;  // a fetch for the first waiter is in flight
  bool again = false;    // woken while serving: look once more when it returns
};

}  // namespace anteroom::store::redis
