"""The asyncio surface: `AsyncQueue`, `AsyncWorker`, `AsyncRoom`, `AsyncScheduler`.

The standard library has no asynchronous HTTP client, and writing one is out of this
package's scope: every HTTP call here is the blocking client's, run in a thread
(`asyncio.to_thread`, the loop's default executor). Handlers of `AsyncWorker` are coroutines
run as tasks on the loop; only the requests leave it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from ._backoff import Backoff, call_with_retries, delay_for
from ._http import DEFAULT_URL, Connection
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
from .errors import AnteroomError, JobFailed, RateLimited, is_transient
from .job import Job
from .queue import Queue
from .room import Room, Updates
from .schedules import Scheduler, Time

log = logging.getLogger("anteroom.aio")

T = TypeVar("T")
AsyncHandler = Callable[[Job], Awaitable[Any]]


async def _off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(partial(fn, *args, **kwargs))


def _next_or_none(stream: Updates) -> dict[str, Any] | None:
    # A default rather than StopIteration, which cannot cross a future.
    return next(stream, None)


class AsyncQueue:
    """`Queue`'s calls as coroutines (same arguments, same answers). `.sync` is the blocking
    `Queue` underneath."""

    def __init__(self, name: str, url: str = DEFAULT_URL, key: str | None = None,
                 **options: Any) -> None:
        self.sync = Queue(name, url, key, **options)
        self.name = name

    async def push(self, payload: Any, **options: Any) -> str:
        return await _off_loop(self.sync.push, payload, **options)

    async def push_bulk(self, jobs: Sequence[dict[str, Any]]) -> list[str]:
        return await _off_loop(self.sync.push_bulk, jobs)

    async def stats(self) -> dict[str, Any]:
        return await _off_loop(self.sync.stats)

    async def inflight(self, worker: str | None = None) -> list[dict[str, Any]]:
        return await _off_loop(self.sync.inflight, worker)

    async def dead(self, limit: int = 100) -> list[dict[str, Any]]:
        return await _off_loop(self.sync.dead, limit)

    async def get_job(self, job_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.get_job, job_id)

    async def wait_for_result(
        self, job_id: str, timeout: float = 30.0, poll_interval: float = 0.25
    ) -> Any:
        """`Queue.wait_for_result`, sleeping on the loop between polls rather than in a
        thread."""
        if poll_interval <= 0:
            raise ValueError("poll_interval must be > 0")
        deadline = time.monotonic() + timeout
        while True:
            job = await self.get_job(job_id)
            state = job.get("state")
            if state == "acked":
                return job.get("result")
            if state in ("dead", "cancelled"):
                raise JobFailed(job)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"job {job_id} is still {state} after {timeout:g} s (attempt "
                    f"{job.get('attempts')} of {job.get('max_attempts')})"
                )
            await asyncio.sleep(min(poll_interval, left))

    async def get_job_dependencies(self, job_id: str) -> list[dict[str, Any]]:
        return await _off_loop(self.sync.get_job_dependencies, job_id)

    async def create_batch(
        self,
        batch_id: str | None = None,
        *,
        on_success: Mapping[str, Any] | None = None,
        on_complete: Mapping[str, Any] | None = None,
        on_dead: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return await _off_loop(
            self.sync.create_batch, batch_id, on_success=on_success, on_complete=on_complete,
            on_dead=on_dead,
        )

    async def seal_batch(self, batch_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.seal_batch, batch_id)

    async def get_batch(self, batch_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.get_batch, batch_id)

    async def ack(
        self, leases: Sequence[str], results: Sequence[Any] | None = None
    ) -> list[dict[str, Any]]:
        return await _off_loop(self.sync.ack, leases, results)

    async def progress(self, lease: str, value: Any) -> dict[str, Any]:
        return await _off_loop(self.sync.progress, lease, value)

    async def log(self, lease: str, *lines: Any) -> dict[str, Any]:
        return await _off_loop(self.sync.log, lease, *lines)

    async def settings(self) -> dict[str, Any]:
        return await _off_loop(self.sync.settings)

    async def set_settings(
        self,
        *,
        fairness: str | None = None,
        limits: Sequence[Mapping[str, Any]] | None = None,
        keep_acked: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        return await _off_loop(
            self.sync.set_settings, fairness=fairness, limits=limits, keep_acked=keep_acked
        )

    async def snooze(self, leases: Sequence[str], retry_after_ms: int) -> list[dict[str, Any]]:
        return await _off_loop(self.sync.snooze, leases, retry_after_ms)

    async def pause(self) -> dict[str, Any]:
        return await _off_loop(self.sync.pause)

    async def resume(self) -> dict[str, Any]:
        return await _off_loop(self.sync.resume)

    async def redrive(self, ids: Sequence[str] | None = None) -> int:
        return await _off_loop(self.sync.redrive, ids)

    async def cancel(self, job_id: str) -> None:
        await _off_loop(self.sync.cancel, job_id)

    async def close(self) -> None:
        await _off_loop(self.sync.close)


class AsyncRoom:
    """`Room`'s calls as coroutines; `updates()` is an async iterator."""

    def __init__(self, name: str, url: str = DEFAULT_URL, **options: Any) -> None:
        self.sync = Room(name, url, **options)
        self.name = name

    async def check(self, session: str | None = None,
                    pass_code: str | None = None) -> dict[str, Any]:
        return await _off_loop(self.sync.check, session, pass_code)

    async def touch(self, session: str) -> dict[str, Any]:
        return await _off_loop(self.sync.touch, session)

    async def leave(self, session: str, final: bool = False) -> dict[str, Any]:
        return await _off_loop(self.sync.leave, session, final)

    async def configure(self, **settings: Any) -> dict[str, Any]:
        return await _off_loop(self.sync.configure, **settings)

    async def get(self) -> dict[str, Any]:
        return await _off_loop(self.sync.get)

    async def updates(self, session: str, *, reconnect: bool = True
                      ) -> AsyncIterator[dict[str, Any]]:
        """The session's statuses over SSE, each read in a thread. Leaving the `async for`
        (or cancelling it) closes the stream."""
        stream = self.sync.updates(session, reconnect=reconnect)
        try:
            while True:
                message = await asyncio.to_thread(_next_or_none, stream)
                if message is None:
                    return
                yield message
        finally:
            stream.close()

    async def close(self) -> None:
        await _off_loop(self.sync.close)


class AsyncScheduler:
    """`Scheduler`'s calls as coroutines (same arguments, same answers). `.sync` is the
    blocking `Scheduler` underneath."""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, **options: Any) -> None:
        self.sync = Scheduler(url, key, **options)

    async def put_schedule(
        self,
        schedule_id: str,
        queue: str,
        *,
        payload: Any,
        cron: str | None = None,
        tz: str | None = None,
        every_ms: int | None = None,
        start_at: Time | None = None,
        end_at: Time | None = None,
        max_runs: int | None = None,
        overlap: str | None = None,
        misfire: str | None = None,
        misfire_grace_ms: int | None = None,
        max_catchup: int | None = None,
        jitter_ms: int | None = None,
        priority: int | None = None,
        group: str | None = None,
        max_attempts: int | None = None,
    ) -> dict[str, Any]:
        return await _off_loop(
            self.sync.put_schedule, schedule_id, queue, payload=payload, cron=cron, tz=tz,
            every_ms=every_ms, start_at=start_at, end_at=end_at, max_runs=max_runs,
            overlap=overlap, misfire=misfire, misfire_grace_ms=misfire_grace_ms,
            max_catchup=max_catchup, jitter_ms=jitter_ms, priority=priority, group=group,
            max_attempts=max_attempts,
        )

    async def schedule(self, schedule_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.schedule, schedule_id)

    async def schedules(self) -> list[dict[str, Any]]:
        return await _off_loop(self.sync.schedules)

    async def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.pause_schedule, schedule_id)

    async def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.resume_schedule, schedule_id)

    async def delete_schedule(self, schedule_id: str) -> dict[str, Any]:
        return await _off_loop(self.sync.delete_schedule, schedule_id)

    async def close(self) -> None:
        await _off_loop(self.sync.close)


class AsyncWorker:
    """`Worker` for coroutine handlers: the same options and the same at-least-once rules
    (acks riding on fetches, extensions at a third of the lease, heartbeats, reclaim with a
    stable `worker_id`, drain on SIGINT/SIGTERM, `RateLimited` as a snooze, what the handler
    returns as the job's result). Handlers run as tasks, at most `concurrency` at once; a
    handler still running after `shutdown_grace_s` is cancelled and its job handed back at once
    (nack, delay 0). A handler reports on its job with `await job.aprogress(value)` and `await
    job.alog(*lines)`."""

    def __init__(
        self,
        queue: AsyncQueue | Queue,
        handler: AsyncHandler,
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
        self.queue: Queue = queue.sync if isinstance(queue, AsyncQueue) else queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.heartbeat_ms = heartbeat_ms
        self.shutdown_grace_s = shutdown_grace_s
        self.wait_ms = wait_ms
        self.handle_signals = handle_signals
        self.worker_id = worker_id or default_worker_id()
        self._reclaim = worker_id is not None
        self.processed = 0
        self.failed = 0
        self.snoozed = 0
        self.reclaimed: int | None = None
        self._held: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        self._extended_at: dict[str, float] = {}
        self._acks: list[PendingAck] = []
        self._fetch_conn: Connection | None = None
        self._error: BaseException | None = None
        self._stopping: asyncio.Event | None = None
        self._released: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None  # a slot freed or stop asked: look again
        self._finished: asyncio.Event | None = None

    async def run(self) -> None:
        """Works until `close()` or a signal, drains, returns (raising a fatal error as
        `Worker.run` does)."""
        loop = asyncio.get_running_loop()
        self._stopping, self._released = asyncio.Event(), asyncio.Event()
        self._changed, self._finished = asyncio.Event(), asyncio.Event()
        signals: list[signal.Signals] = []
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self._on_signal)
                    signals.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        fetch = asyncio.create_task(self._fetch_loop())
        maintenance = asyncio.create_task(self._maintenance_loop())
        try:
            await self._stopping.wait()
            await self._drain(fetch, maintenance)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            self._finished.set()
        if self._error is not None:
            raise self._error

    async def close(self) -> None:
        """Stops as a signal does and waits for `run()` to return."""
        self._request_stop()
        if self._finished is not None:
            await self._finished.wait()

    def _on_signal(self) -> None:
        assert self._stopping is not None and self._released is not None
        if self._stopping.is_set():
            self._released.set()
        else:
            self._request_stop()

    def _request_stop(self) -> None:
        if self._stopping is None:
            return
        self._stopping.set()
        if self._fetch_conn is not None:
            self._fetch_conn.interrupt()
        assert self._changed is not None
        self._changed.set()

    async def _drain(self, fetch: asyncio.Task[None], maintenance: asyncio.Task[None]) -> None:
        assert self._released is not None
        await fetch
        running = [task for _, task in self._held.values()]
        if running and not self._released.is_set():
            # Until every handler ended, the grace ran out, or a second signal.
            all_ended = asyncio.ensure_future(asyncio.wait(running))
            released = asyncio.ensure_future(self._released.wait())
            await asyncio.wait([all_ended, released], timeout=self.shutdown_grace_s,
                               return_when=asyncio.FIRST_COMPLETED)
            all_ended.cancel()  # cancels the waiting, not the handlers
            released.cancel()
        left_over = list(self._held.values())
        self._held.clear()
        for _, task in left_over:
            task.cancel()
        if left_over:
            leases = [job.lease for job, _ in left_over]
            log.warning("grace over: handing back %d job(s) still running", len(leases))
            await self._nack(leases, CLOSED_BEFORE_FINISH, 0, retries=3)
        await self._flush_acks(everything=True)
        maintenance.cancel()
        try:
            await maintenance
        except asyncio.CancelledError:
            pass
        if self._fetch_conn is not None:
            self._fetch_conn.close()

    async def _fetch_loop(self) -> None:
        assert self._stopping is not None and self._changed is not None
        conn = self._fetch_conn = self.queue.connection()
        await self._heartbeat()  # before the first fetch, as Worker does
        backoff = Backoff()
        reclaim = self._reclaim
        while not self._stopping.is_set():
            free = self.concurrency - len(self._held)
            if free <= 0:
                self._changed.clear()
                await self._changed.wait()
                continue
            acks = take_acks(self._acks)
            try:
                answer = await _off_loop(
                    self.queue.fetch, self.worker_id, free, lease_ms=self.lease_ms,
                    wait_ms=self.wait_ms, ack=[a.lease for a in acks],
                    ack_results=ack_results(acks), reclaim=reclaim, connection=conn,
                )
            except Exception as exc:
                if acks and is_result_refused(exc):
                    # A result the server measured over 64 KiB refused the whole fetch: each
                    # ack goes alone, so only that job fails, and the loop goes on.
                    await self._ack_alone(acks, retries=5)
                    continue
                now = time.monotonic()
                for a in acks:
                    a.at = now
                self._acks[:0] = acks
                if self._stopping.is_set():
                    return
                if reclaim and is_reclaim_refused(exc):
                    reclaim = False
                    continue
                if is_transient(exc) or (
                    isinstance(exc, AnteroomError) and exc.status in (408, 429)
                ):
                    delay = delay_for(exc, backoff)
                    log.warning("fetch failed (%s); again in %.2f s", exc, delay)
                    try:
                        await asyncio.wait_for(self._stopping.wait(), delay)
                    except asyncio.TimeoutError:
                        pass
                    continue
                self._error = exc
                self._request_stop()
                return
            backoff.reset()
            if reclaim:
                reclaim = False
                self.reclaimed = answer.get("reclaimed")
            jobs = [Job.from_wire(j, self.queue) for j in answer.get("jobs", [])]
            if self._stopping.is_set():
                if jobs:
                    await self._nack([j.lease for j in jobs], CLOSED_BEFORE_START, 0, retries=3)
                return
            now = time.monotonic()
            for job in jobs:
                task = asyncio.create_task(self._run_job(job))
                self._held[job.lease] = (job, task)
                self._extended_at[job.lease] = now

    async def _run_job(self, job: Job) -> None:
        try:
            result = await self.handler(job)
        except asyncio.CancelledError:
            self._forget(job)  # handed back by the drain, which nacks it
            raise
        except RateLimited as exc:
            self.snoozed += 1
            if self._forget(job):
                await self._snooze(job.lease, exc.retry_after_ms)
            return
        except Exception as exc:
            self.failed += 1
            if self._forget(job):
                await self._nack([job.lease], error_text(exc), None, retries=5)
            return
        try:
            size = result_size(result)
        except ValueError as exc:
            self.failed += 1
            if self._forget(job):
                log.warning("job %s failed (attempt %d): %s", job.id, job.attempt, exc)
                await self._nack([job.lease], str(exc), None, retries=5)
            return
        if self._forget(job):
            self.processed += 1
            self._acks.append(PendingAck(job.lease, time.monotonic(), result, size))

    def _forget(self, job: Job) -> bool:
        """Frees the job's slot; False when the drain handed it back already."""
        self._extended_at.pop(job.lease, None)
        held = self._held.pop(job.lease, None) is not None
        assert self._changed is not None
        self._changed.set()
        return held

    async def _nack(self, leases: list[str], error: str, delay_ms: int | None,
                    retries: int) -> None:
        try:
            await _off_loop(
                call_with_retries,
                lambda: self.queue.nack(leases, delay_ms=delay_ms, error=error), retries,
            )
        except Exception as exc:
            log.warning("nack failed (%s): the jobs come back when their leases end", exc)

    async def _snooze(self, lease: str, retry_after_ms: int) -> None:
        try:
            await _off_loop(
                call_with_retries, lambda: self.queue.snooze([lease], retry_after_ms), 5
            )
        except Exception as exc:
            log.warning("snooze failed (%s): the job comes back when its lease ends", exc)

    async def _maintenance_loop(self) -> None:
        tick = max(0.01, min(0.05, self.lease_ms / 12000))
        period = self.heartbeat_ms / 3000
        next_heartbeat = time.monotonic() + period  # the fetch loop sends the first one
        while True:
            now = time.monotonic()
            if now >= next_heartbeat:
                next_heartbeat = now + period
                await self._heartbeat()
            if any(now - t >= self.lease_ms / 3000 for t in self._extended_at.values()):
                leases = list(self._extended_at)
                try:
                    results = await _off_loop(self.queue.extend, leases, self.lease_ms)
                    for item in results:
                        if item.get("lease") in self._extended_at:
                            self._extended_at[item["lease"]] = now
                        if not item.get("ok"):
                            log.warning("lease %s lost: %s", item.get("lease"), item.get("code"))
                except Exception as exc:
                    log.warning("lease extension failed: %s", exc)
            await self._flush_acks(everything=False)
            await asyncio.sleep(tick)

    async def _heartbeat(self) -> None:
        try:
            await _off_loop(self.queue.heartbeat, self.worker_id, self.heartbeat_ms)
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)

    async def _flush_acks(self, *, everything: bool) -> None:
        while True:
            cutoff = time.monotonic() - ACK_HOLD_S
            if not self._acks or not (everything or self._acks[0].at <= cutoff):
                return
            acks = take_acks(self._acks)
            try:
                await _off_loop(self.queue.ack, [a.lease for a in acks], ack_results(acks))
            except Exception as exc:
                if is_result_refused(exc):
                    await self._ack_alone(acks, retries=0)
                    continue
                if not everything and is_transient(exc):
                    now = time.monotonic()
                    for a in acks:
                        a.at = now
                    self._acks[:0] = acks
                    return
                log.warning("ack failed (%s): the jobs will be delivered again", exc)

    async def _ack_alone(self, acks: list[PendingAck], *, retries: int) -> None:
        """`Worker._ack_alone`: each ack of a request refused for a result over 64 KiB on its
        own, the job of that result failed with an error saying so."""
        for a in acks:
            results = None if a.result is None else [a.result]
            try:
                await _off_loop(
                    call_with_retries, partial(self.queue.ack, [a.lease], results), retries
                )
            except Exception as exc:
                if is_result_refused(exc):
                    self.processed -= 1
                    self.failed += 1
                    await self._nack([a.lease], result_too_large(None), None, retries=retries)
                else:
                    log.warning("ack failed (%s): the job will be delivered again", exc)
