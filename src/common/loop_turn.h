#pragma once
// The end of an event loop's turn (Redis's beforeSleep): a function queued here runs once the
// loop has run the handlers it had ready, before it waits for more. Each I/O thread binds its
// loop (http/io_pool.cc). Code that may run on such a thread and wants to batch what the turn
// produced (the log's group write, store/log/journal.h) queues its work here, so the work stays
// on this thread: no hand-off to another thread, no wake-up.

#include <functional>

namespace anteroom {

class LoopTurn {
 public:
  using Post = std::function<void(std::function<void()>)>;
  // Binds the calling thread to its loop: `post` queues a function behind the handlers the loop
  // has ready now (asio::post on the thread's own io_context).
  static void Bind(Post post);
  static void Unbind();
  // An identity of the calling thread's loop, or nullptr on a thread without one.
  static const void* Current();
  // Queues fn at the end of the calling thread's turn. Only on a bound thread (Current()).
  static void AtEnd(std::function<void()> fn);
};

}  // namespace anteroom
