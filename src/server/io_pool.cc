#include "server/io_pool.h"

#include <thread>

namespace anteroom::server {

IoPool::IoPool(unsigned threads) {
  for (unsigned i = 0; i < (threads ? threads : 1); ++i) {
    contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.push_back(boost::asio::make_work_guard(*contexts_.back()));
  }
}

boost::asio::io_context& IoPool::Next() {
  return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

void IoPool::Run() {
  std::vector<std::thread> threads;
  for (size_t i = 1; i < contexts_.size(); ++i) {
    threads.emplace_back([ctx = contexts_[i].get()] { ctx->run(); });
  }
  contexts_.front()->run();
  for (auto& t : threads) t.join();
}

void IoPool::Stop() {
  guards_.clear();
  for (auto& ctx : contexts_) ctx->stop();
}

}  // namespace anteroom::server
