// An async iterator over messages pushed by a connection. Unlike an async generator, its
// return() works at any moment, even while a next() is waiting for data: it hangs up at once
// (a generator would only see the return after its pending await finished, which on a quiet
// stream may be never).
export class Feed {
  // hangUp(): closes the connection; called once, by return() or when the stream ends.
  constructor(hangUp) {
    this.hangUp = hangUp;
    this.queue = [];
    this.waiting = [];
    this.done = false;
    this.error = null;
  }

  push(value) {
    if (this.done) return;
    const waiter = this.waiting.shift();
    if (waiter) waiter.resolve({ value, done: false });
    else this.queue.push(value);
  }

  // The stream ended (with an error, or null when it ended cleanly). Messages already queued
  // are still read; then next() answers done (or rejects with the error).
  end(error = null) {
    if (this.done) return;
    this.done = true;
    this.error = error;
    this.close();
    for (const waiter of this.waiting.splice(0)) {
      if (error) waiter.reject(error);
      else waiter.resolve({ value: undefined, done: true });
    }
  }

  close() {
    const hangUp = this.hangUp;
    this.hangUp = null;
    hangUp?.();
  }

  next() {
    if (this.queue.length) return Promise.resolve({ value: this.queue.shift(), done: false });
    if (this.done) {
      if (this.error) {
        const error = this.error;
        this.error = null; // reported once; then the iterator is simply done
        return Promise.reject(error);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  return() {
    this.queue = [];
    this.end(null);
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}
