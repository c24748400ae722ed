#pragma once
// What a draining server tells its connections. SIGTERM stops the listener, then every open
// connection and live stream is asked to end the way its client can carry on from: a kept-alive
// connection with nothing in flight closes; one with requests answers them (parked long polls at
// once, with what they have) and closes after; a live stream says "reconnect elsewhere"
// (WebSocket close 1012, the last chunk of an event stream). Members are held weakly, so the
// list never keeps a connection open.

#include <memory>
#include <mutex>
#include <vector>

namespace anteroom::http {

class Drainable {
 public:
  virtual ~Drainable() = default;
  // Called on any thread: the member moves to its own thread and ends from there.
  virtual void BeginDrain() = 0;
};

class DrainList {
 public:
  // Any thread. A member added once the drain began is told at once.
  void Add(const std::shared_ptr<Drainable>& member);
  // Tells every member; members added later are told as they come. Once.
  void Drain();
  bool draining() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<Drainable>> members_;  // guarded by mu_; some may be gone
  size_t prune_at_ = kMinPrune;                    // guarded by mu_
  bool draining_ = false;                          // guarded by mu_
  static constexpr size_t kMinPrune = 1024;
};

}  // namespace anteroom::http
