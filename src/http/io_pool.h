#pragma once
// One io_context per thread: connections are spread round-robin and each stays on its thread,
// so I/O threads never contend on a shared scheduler queue.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <vector>

namespace anteroom::http {

class IoPool {
 public:
  explicit IoPool(unsigned threads);
  // The context that owns listeners and signals.
  boost::asio::io_context& Main() { return *contexts_.front(); }
  // The context for the next connection.
  boost::asio::io_context& Next();
  size_t size() const { return contexts_.size(); }
  // Every context, the main one first (e.g. for a backend to run on the same threads).
  std::vector<boost::asio::io_context*> Contexts() const {
    std::vector<boost::asio::io_context*> out;
    for (const auto& c : contexts_) out.push_back(c.get());
    return out;
  }
  // Runs every context (one on the calling thread) until Stop().
  void Run();
  void Stop();

 private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<Guard> guards_;
  std::atomic<size_t> next_{0};
};

}  // namespace anteroom::http
