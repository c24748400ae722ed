"""`Worker`: runs a handler for each job of a queue on threads, with at-least-once delivery.

Threads: a fetch loop (one long poll at a time, `max` = free slots, finished jobs' acks and
results riding on it), `concurrency` slot threads running the handler, and a maintenance loop
(lease extensions, heartbeats, acks that could not ride). Each thread has its own keep-alive
connection, so no request waits for another's socket.
"""

from __future__ import annotations

import logging
import queue as stdqueue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from ._backoff import Backoff, call_with_retries, delay_for
from ._http import Connection
from ._worker_common import (
    ACK_HOLD_S,
    CLOSED_BEFORE_FINISH,
    CLOSED_BEFORE_START,
    PendingAck,
    ack_results,
    check_options,
    default_worker_id,
    error_text,
    is_reclaim_refused,
    is_result_refused,
    result_size,
    result_too_large,
    take_acks,
)
from .errors import AnteroomError, RateLimited, is_transient
from .job import Job
from .queue import Queue

log = logging.getLogger("anteroom.worker")

Handler = Callable[[Job], Any]

# Calls made while closing are retried this often at most, so a dead server cannot hold
# `run()` past its grace for long.
_CLOSING_RETRIES = 3


@dataclass
class _Held:
    """A job this worker holds a lease on, from its fetch until its handler ends."""

    job: Job
    extended_at: float = field(default_factory=time.monotonic)
    abandoned: bool = False  # handed back at close: its handler's end must not ack it


class Worker:
    """Runs `handler(job)` for each job of `queue`: returning acks the job, raising nacks it
    with the traceback as its error (retried with the server's backoff, dead after
    `max_attempts`), raising `RateLimited(ms)` snoozes it (back after `ms`, the attempt not
    used up, its group held meanwhile).

    What the handler returns is the job's result (`Queue.get_job`, `Queue.wait_for_result`):
    a JSON-serializable value of at most 64 KiB serialized, None for no result. A result that
    cannot be kept (not JSON, or larger) is not dropped silently: the job fails as if the
    handler had raised, with an error that says so. While it runs, the handler may report on
    its job: `job.progress(value)`, `job.log(*lines)`.

    - `concurrency`: handlers running at once, never more.
    - `lease_ms`: each delivery's lease; extended at a third of it while the handler runs.
    - `heartbeat_ms`: the worker's ttl, renewed at a third of it: a worker silent past it (a
      crashed process) has its jobs released at once, not at the end of their leases.
    - `wait_ms`: how long one fetch waits for a job (long poll).
    - `worker_id`: a stable name lets a restarted worker take back the jobs it held (its first
      fetch sends `reclaim`); the default is unique per process.
    - `shutdown_grace_s`: at SIGINT/SIGTERM or `close()`, how long running handlers may take to
      finish; what is left is then handed back at once (nack, delay 0).
    - `handle_signals`: `run()` installs SIGINT/SIGTERM handlers when called from the main
      thread (restored when it returns). A second signal ends the grace at once.
    """

    def __init__(
        self,
        queue: Queue,
        handler: Handler,
        *,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        heartbeat_ms: int = 10_000,
        shutdown_grace_s: float = 25.0,
        worker_id: str | None = None,
        wait_ms: int = 30_000,
        handle_signals: bool = True,
    ) -> None:
        check_options(concurrency, lease_ms, heartbeat_ms, wait_ms, shutdown_grace_s)
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.heartbeat_ms = heartbeat_ms
        self.shutdown_grace_s = shutdown_grace_s
        self.wait_ms = wait_ms
        self.handle_signals = handle_signals
        self.worker_id = worker_id or default_worker_id()
        self._reclaim = worker_id is not None
        # Counters, for logs and tests.
        self.processed = 0  # handlers that returned
        self.failed = 0  # handlers that raised
        self.snoozed = 0  # handlers that raised RateLimited
        self.reclaimed: int | None = None  # what the reclaiming fetch took back, if it did

        # An RLock: the signal handler runs on the main thread, which may hold it already.
        self._cond = threading.Condition(threading.RLock())
        self._held: dict[str, _Held] = {}
        self._acks: list[PendingAck] = []  # finished jobs' acks waiting to be sent
        self._tasks: stdqueue.SimpleQueue[Job | None] = stdqueue.SimpleQueue()
        self._stopping = threading.Event()  # no more fetching
        self._released = threading.Event()  # the grace is over: hand back what is left
        self._done = threading.Event()  # the maintenance loop may end
        self._finished = threading.Event()
        self._finished.set()
        self._fetch_conn: Connection | None = None
        self._error: BaseException | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def run(self) -> None:
        """Works until `close()` or a signal, then drains (see the class) and returns. Raises
        what stopped the worker when it was an error the server will not get over by itself
        (a wrong key: 401; an invalid option: 400)."""
        if not self._finished.is_set():
            raise RuntimeError("this worker is running already")
        if self._stopping.is_set():
            raise RuntimeError("a closed worker cannot run again")
        self._finished.clear()
        previous = self._install_signals()
        threads = [threading.Thread(target=self._fetch_loop, name="anteroom-fetch", daemon=True)]
        threads.append(
            threading.Thread(target=self._maintenance_loop, name="anteroom-maint", daemon=True)
        )
        # Daemon threads: a handler still running after the grace (its job already handed
        # back) must not keep the process from exiting.
        for i in range(self.concurrency):
            threads.append(
                threading.Thread(target=self._slot_loop, name=f"anteroom-slot-{i}", daemon=True)
            )
        log.info("worker %s on queue %s: %d slot(s)", self.worker_id, self.queue.name,
                 self.concurrency)
        interrupted: BaseException | None = None
        try:
            for t in threads:
                t.start()
            try:
                # Short waits: the main thread runs Python's signal handlers between them.
                while not self._stopping.wait(0.2):
                    pass
            except BaseException as exc:  # KeyboardInterrupt without our handlers
                interrupted = exc
                self._request_stop()
            self._drain(threads[0], threads[1])
        finally:
            self._restore_signals(previous)
            self._finished.set()
        log.info("worker %s stopped", self.worker_id)
        if interrupted is not None:
            raise interrupted
        if self._error is not None:
            raise self._error

    def close(self, timeout: float | None = None) -> None:
        """Stops the worker as a signal does, and waits (up to the grace and a few seconds, or
        `timeout`) for `run()` to return. Safe from any thread but a handler's."""
        self._request_stop()
        limit = self.shutdown_grace_s + 10 if timeout is None else timeout
        self._finished.wait(limit)

    def _request_stop(self) -> None:
        self._stopping.set()
        conn = self._fetch_conn
        if conn is not None:
            conn.interrupt()  # a parked long poll ends now, not after wait_ms
        with self._cond:
            self._cond.notify_all()

    def _install_signals(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return previous
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _restore_signals(self, previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping.is_set():
            log.info("second signal: handing back the running jobs now")
            self._released.set()
            with self._cond:
                self._cond.notify_all()
        else:
            log.info("signal %d: draining (grace %.1f s)", signum, self.shutdown_grace_s)
            self._request_stop()

    def _drain(self, fetch_thread: threading.Thread, maintenance: threading.Thread) -> None:
        fetch_thread.join(self.queue._pool.timeout + 5)
        deadline = time.monotonic() + self.shutdown_grace_s
        with self._cond:
            while self._held and not self._released.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
            left_over = [h for h in self._held.values()]
            for h in left_over:
                h.abandoned = True
            self._held.clear()
        if left_over:
            leases = [h.job.lease for h in left_over]
            log.warning("grace over: handing back %d job(s) still running", len(leases))
            self._send_nack(leases, CLOSED_BEFORE_FINISH, delay_ms=0, retries=_CLOSING_RETRIES)
        self._flush_acks(everything=True)
        for _ in range(self.concurrency):
            self._tasks.put(None)
        self._done.set()
        maintenance.join(self.queue._pool.timeout + 5)
        if self._fetch_conn is not None:
            self._fetch_conn.close()

    # -- fetching ---------------------------------------------------------------------------

    def _free(self) -> int:
        return self.concurrency - len(self._held)

    def _fetch_loop(self) -> None:
        conn = self._fetch_conn = self.queue.connection()
        if self._stopping.is_set():
            return
        # The heartbeat goes before the first fetch: a process killed right after taking
        # jobs is then known to be gone within its ttl, not only when the leases end.
        self._heartbeat()
        backoff = Backoff()
        reclaim = self._reclaim
        while True:
            with self._cond:
                while not self._stopping.is_set() and self._free() == 0:
                    self._cond.wait()
                if self._stopping.is_set():
                    return
                want = self._free()
                acks = take_acks(self._acks)
            try:
                answer = self.queue.fetch(
                    self.worker_id, want, lease_ms=self.lease_ms, wait_ms=self.wait_ms,
                    ack=[a.lease for a in acks], ack_results=ack_results(acks),
                    reclaim=reclaim, connection=conn,
                )
            except Exception as exc:
                if acks and is_result_refused(exc):
                    # A result the server measured over 64 KiB refused the whole fetch: each
                    # ack goes alone, so only that job fails, and the loop goes on.
                    self._ack_alone(acks, retries=5)
                    continue
                with self._cond:  # acks are idempotent: they go with the next request
                    now = time.monotonic()
                    for a in acks:
                        a.at = now
                    self._acks[:0] = acks
                if self._stopping.is_set():
                    return
                if reclaim and is_reclaim_refused(exc):
                    log.warning("the server does not take 'reclaim' (%s): fetching without", exc)
                    reclaim = False
                    continue
                if is_transient(exc) or (
                    isinstance(exc, AnteroomError) and exc.status in (408, 429)
                ):
                    delay = delay_for(exc, backoff)
                    log.warning("fetch failed (%s); again in %.2f s", exc, delay)
                    self._stopping.wait(delay)
                    continue
                log.error("fetch refused, stopping: %s", exc)
                self._error = exc
                self._request_stop()
                return
            backoff.reset()
            if reclaim:
                reclaim = False
                self.reclaimed = answer.get("reclaimed")
                if self.reclaimed:
                    log.info("took back %d job(s) held before a restart", self.reclaimed)
            for item in answer.get("acked", []):
                if not item.get("ok"):
                    log.warning("ack of %s not taken: %s", item.get("lease"), item.get("code"))
            jobs = [Job.from_wire(j, self.queue) for j in answer.get("jobs", [])]
            with self._cond:
                late = self._stopping.is_set()
                if not late:
                    for job in jobs:
                        self._held[job.lease] = _Held(job)
                        self._tasks.put(job)
            if late and jobs:  # answered as the worker closed: not ours to start
                self._send_nack([j.lease for j in jobs], CLOSED_BEFORE_START, delay_ms=0,
                                retries=_CLOSING_RETRIES)

    # -- running ----------------------------------------------------------------------------

    def _slot_loop(self) -> None:
        while True:
            job = self._tasks.get()
            if job is None:
                return
            with self._cond:
                if job.lease not in self._held:  # handed back at close before it started
                    continue
            error: BaseException | None = None
            result: Any = None
            size = 0
            unkept: str | None = None  # why the result cannot be kept
            try:
                result = self.handler(job)
            except BaseException as exc:  # even SystemExit: the slot must be freed
                error = exc
            if error is None:
                try:
                    size = result_size(result)
                except ValueError as exc:
                    unkept = str(exc)
            with self._cond:
                held = self._held.pop(job.lease, None)
                if held is not None and error is None and unkept is None:
                    self._acks.append(PendingAck(job.lease, time.monotonic(), result, size))
                self._cond.notify_all()
            if held is None:  # handed back already: the job is another worker's now
                log.info("job %s ended after it was handed back", job.id)
                continue
            if unkept is not None:
                self.failed += 1
                log.warning("job %s failed (attempt %d): %s", job.id, job.attempt, unkept)
                self._send_nack([job.lease], unkept, delay_ms=None, retries=5)
            elif error is None:
                self.processed += 1
            elif isinstance(error, RateLimited):
                self.snoozed += 1
                log.info("job %s rate limited: again in %d ms", job.id, error.retry_after_ms)
                self._send_snooze(job.lease, error.retry_after_ms)
            else:
                self.failed += 1
                log.info("job %s failed (attempt %d): %r", job.id, job.attempt, error)
                self._send_nack([job.lease], error_text(error), delay_ms=None, retries=5)

    def _send_nack(
        self, leases: list[str], error: str, *, delay_ms: int | None, retries: int
    ) -> None:
        try:
            results = call_with_retries(
                lambda: self.queue.nack(leases, delay_ms=delay_ms, error=error), retries
            )
        except Exception as exc:
            # The leases run out by themselves: the jobs come back then.
            log.warning("nack failed (%s): the jobs come back when their leases end", exc)
            return
        for item in results:
            if not item.get("ok"):
                log.warning("nack of %s not taken: %s", item.get("lease"), item.get("code"))

    def _send_snooze(self, lease: str, retry_after_ms: int) -> None:
        try:
            results = call_with_retries(lambda: self.queue.snooze([lease], retry_after_ms), 5)
        except Exception as exc:
            # The lease runs out by itself: the job comes back then, as a failed attempt.
            log.warning("snooze failed (%s): the job comes back when its lease ends", exc)
            return
        for item in results:
            if not item.get("ok"):
                log.warning("snooze of %s not taken: %s", item.get("lease"), item.get("code"))

    # -- maintenance ------------------------------------------------------------------------

    def _maintenance_loop(self) -> None:
        tick = max(0.01, min(0.05, self.lease_ms / 12000))
        # At a third of the ttl: two heartbeats may be lost before the worker counts as gone.
        period = self.heartbeat_ms / 3000
        next_heartbeat = time.monotonic() + period  # the fetch loop sends the first one
        while not self._done.wait(tick):
            now = time.monotonic()
            if now >= next_heartbeat:
                next_heartbeat = now + period
                self._heartbeat()
            self._extend_due(now)
            self._flush_acks(everything=False)

    def _heartbeat(self) -> None:
        try:
            self.queue.heartbeat(self.worker_id, self.heartbeat_ms)
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)

    def _extend_due(self, now: float) -> None:
        # At a third of the lease, so one lost extension still leaves time for the next.
        with self._cond:
            held = list(self._held.values())
        if not any(now - h.extended_at >= self.lease_ms / 3000 for h in held):
            return
        try:
            results = self.queue.extend([h.job.lease for h in held], self.lease_ms)
        except Exception as exc:
            log.warning("lease extension failed: %s", exc)
            return
        by_lease = {h.job.lease: h for h in held}
        for item in results:
            h = by_lease.get(item.get("lease", ""))
            if h is None:
                continue
            h.extended_at = now
            if item.get("ok"):
                # The answer says ok, not the new deadline: estimated by this machine's clock.
                h.job.lease_expires_ms = int(time.time() * 1000) + self.lease_ms
            else:
                log.warning("job %s: lease lost (%s): it may run twice", h.job.id,
                            item.get("code"))

    def _flush_acks(self, *, everything: bool) -> None:
        """Acks that could not ride on a fetch: those waiting longer than ACK_HOLD_S (a fetch
        is parked, or every slot was refilled), or all of them when closing."""
        while True:
            cutoff = time.monotonic() - ACK_HOLD_S
            with self._cond:
                if not self._acks or not (everything or self._acks[0].at <= cutoff):
                    return
                acks = take_acks(self._acks)
            leases = [a.lease for a in acks]
            results = ack_results(acks)
            try:
                retries = _CLOSING_RETRIES if everything else 0
                answer = call_with_retries(lambda: self.queue.ack(leases, results), retries)
            except Exception as exc:
                if is_result_refused(exc):
                    self._ack_alone(acks, retries=retries)
                    continue
                if not everything and is_transient(exc):
                    with self._cond:  # tried again at the next tick or fetch, while leases last
                        now = time.monotonic()
                        for a in acks:
                            a.at = now
                        self._acks[:0] = acks
                    return
                log.warning("ack failed (%s): the jobs will be delivered again", exc)
                continue
            for item in answer:
                if not item.get("ok"):
                    log.warning("ack of %s not taken: %s", item.get("lease"), item.get("code"))

    def _ack_alone(self, acks: list[PendingAck], *, retries: int) -> None:
        """Acks one at a time those of a request refused for a result over 64 KiB (as the
        server measured it): the job whose result it was fails with an error saying so, the
        others are acked with theirs."""
        for a in acks:
            try:
                results = None if a.result is None else [a.result]
                answer = call_with_retries(lambda: self.queue.ack([a.lease], results), retries)
            except Exception as exc:
                if is_result_refused(exc):
                    self.processed -= 1
                    self.failed += 1
                    self._send_nack([a.lease], result_too_large(None), delay_ms=None,
                                    retries=retries)
                else:
                    log.warning("ack failed (%s): the job will be delivered again", exc)
                continue
            for item in answer:
                if not item.get("ok"):
                    log.warning("ack of %s not taken: %s", item.get("lease"), item.get("code"))
