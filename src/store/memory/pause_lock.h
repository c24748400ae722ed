#pragma once
// A readers-writer lock that prefers the writer: every request holds it shared while it reads
// or changes state; a snapshot takes it exclusively for the instant of fork(), so the child sees
// no change half made. Writer preference matters: with std::shared_mutex (glibc's default
// reader preference) a steady stream of overlapping requests could hold the snapshot off
// forever. Not recursive: a thread must not take it shared twice.

#include <pthread.h>

#include <stdexcept>

namespace anteroom::store {

class PauseLock {
 public:
  PauseLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("pthread_rwlock_init failed");
  }
  ~PauseLock() { pthread_rwlock_destroy(&lock_); }
  PauseLock(const PauseLock&) = delete;
  PauseLock& operator=(const PauseLock&) = delete;

  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }
  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace anteroom::store
