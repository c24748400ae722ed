#include "http/io_pool.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <chrono>
#include <exception>
#include <thread>

#include "common/loop_turn.h"

namespace anteroom::http {

IoPool::IoPool(unsigned threads) {
  for (unsigned i = 0; i < (threads ? threads : 1); ++i) {
    contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.push_back(boost::asio::make_work_guard(*contexts_.back()));
  }
}

boost::asio::io_context& IoPool::Next() {
  return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

namespace {

// Runs a context until it stops. A handler that throws loses what it was doing (its connection
// is released with the handler's state), not the process: the context runs on. Logged at most
// once a second per thread, with a count, so a flood of bad input cannot flood the log.
void RunGuarded(boost::asio::io_context& ctx) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_log{};
  uint64_t unlogged = 0;
  while (true) {
    try {
      ctx.run();
      return;
    } catch (const std::exception& e) {
      ++unlogged;
      if (Clock::now() - last_log >= std::chrono::seconds(1)) {
        spdlog::error("an I/O handler threw ({} time(s) since the last report): {}", unlogged,
                      e.what());
        unlogged = 0;
        last_log = Clock::now();
      }
    } catch (...) {
      spdlog::error("an I/O handler threw something that is not a std::exception");
    }
  }
}

// Runs a context with the thread bound to it (common/loop_turn.h): what a handler queues for
// the end of the turn is posted to this context, which runs it once the handlers ready now ran.
void RunBound(boost::asio::io_context& ctx) {
  LoopTurn::Bind([&ctx](std::function<void()> fn) { boost::asio::post(ctx, std::move(fn)); });
  RunGuarded(ctx);
  LoopTurn::Unbind();
}

}  // namespace

void IoPool::Run() {
  std::vector<std::thread> threads;
  for (size_t i = 1; i < contexts_.size(); ++i) {
    threads.emplace_back([ctx = contexts_[i].get()] { RunBound(*ctx); });
  }
  RunBound(*contexts_.front());
  for (auto& t : threads) t.join();
}

void IoPool::Stop() {
  guards_.clear();
  for (auto& ctx : contexts_) ctx->stop();
}

}  // namespace anteroom::http
