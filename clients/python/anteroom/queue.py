"""`Queue`: a producer's and an operator's view of one queue (docs/api.md, "Queues")."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ._backoff import call_with_retries
from ._http import DEFAULT_URL, Connection, Pool, quote
from .errors import JobFailed

# What a job's log takes in one request (docs/api.md, "Job state").
_LOG_LINES_PER_REQUEST = 100

# The states after which a job changes no more.
_FINISHED = ("acked", "dead", "cancelled")

# The fields a pushed job may carry besides its payload (POST /v1/queues/{q}/jobs).
_PUSH_FIELDS = (
    "payload", "delay_ms", "priority", "dedupe_key", "max_attempts", "group", "depends_on",
    "on_dependency_failure", "batch",
)


def _job_ids(ids: Any) -> Any:
    # Job ids are decimal strings; a lone string is sent as it is, for the server to refuse,
    # rather than split into one id per character.
    if isinstance(ids, (str, bytes)):
        return ids
    return [str(i) for i in ids]


def _job_body(
    payload: Any,
    delay_ms: int | None,
    priority: int | None,
    dedupe_key: str | None,
    max_attempts: int | None,
    group: str | None,
    depends_on: Sequence[str] | None = None,
    on_dependency_failure: str | None = None,
    batch: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"payload": payload}
    # Fields left out take the server's defaults, which then stay in one place.
    if delay_ms is not None:
        body["delay_ms"] = delay_ms
    if priority is not None:
        body["priority"] = priority
    if dedupe_key is not None:
        body["dedupe_key"] = dedupe_key
    if max_attempts is not None:
        body["max_attempts"] = max_attempts
    if group is not None:
        body["group"] = group
    if depends_on is not None:
        body["depends_on"] = _job_ids(depends_on)
    if on_dependency_failure is not None:
        body["on_dependency_failure"] = on_dependency_failure
    if batch is not None:
        body["batch"] = batch
    return body


class Queue:
    """One queue of a server. Thread-safe: each call takes a kept-alive connection from a
    small pool.

    `key` is sent on the queue routes (default `$ANTEROOM_QUEUE_KEY`, else
    `$ANTEROOM_ADMIN_KEY`), `admin_key` on the admin ones: `pause`, `resume`, `redrive`,
    `cancel`, `set_settings`, `release_worker` (default `$ANTEROOM_ADMIN_KEY`, else `key`).
    `retries` > 0 retries calls that fail because the server is unreachable or answers 503,
    with jittered exponential backoff: a retried push may then be stored twice (its first
    answer lost), unless it carries a `dedupe_key`.
    """

    def __init__(
        self,
        name: str,
        url: str = DEFAULT_URL,
        key: str | None = None,
        *,
        admin_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 0,
    ) -> None:
        self.name = name
        self.url = url
        if key is None:
            key = os.environ.get("ANTEROOM_QUEUE_KEY") or os.environ.get("ANTEROOM_ADMIN_KEY")
        if admin_key is None:
            admin_key = os.environ.get("ANTEROOM_ADMIN_KEY") or key
        self.key = key
        self.retries = retries
        self._path = f"/v1/queues/{quote(name)}"
        self._pool = Pool(url, key, timeout)
        self._admin = self._pool if admin_key == key else Pool(url, admin_key, timeout)

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, pool: Pool, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        def call() -> Any:
            return pool.request(method, self._path + path, body, **kw)

        return call_with_retries(call, self.retries)

    def connection(self) -> Connection:
        """A connection of its own to the server with the queue key (workers hold one per
        thread, and may interrupt it)."""
        return self._pool.new()

    def close(self) -> None:
        self._pool.close()
        self._admin.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- producing --------------------------------------------------------------------------

    def push(
        self,
        payload: Any,
        *,
        delay_ms: int | None = None,
        priority: int | None = None,
        dedupe_key: str | None = None,
        max_attempts: int | None = None,
        group: str | None = None,
        depends_on: Sequence[str] | None = None,
        on_dependency_failure: str | None = None,
        batch: str | None = None,
    ) -> str:
        """Pushes one job; answers its id (an existing job's id for a `dedupe_key` hit).
        `group` (a tenant, a customer) is what per-group limits and round-robin turns are kept
        by (`set_settings`).

        `depends_on` (1..100 ids of older jobs of this queue) holds the job in state
        `waiting_deps`, not fetchable, until every one of them is acked; a dependency that dies,
        is cancelled or is not known fails it at once (dead), unless `on_dependency_failure` is
        `"ignore"` (default `"fail"`): then it stops waiting for that one. Its worker reads what
        they gave with `get_job_dependencies`. `batch` joins an open batch of this queue
        (`create_batch`); an unknown one raises `AnteroomError` 404 `unknown_batch`, a sealed
        one 409 `conflict`, and nothing is pushed."""
        body = _job_body(
            payload, delay_ms, priority, dedupe_key, max_attempts, group, depends_on,
            on_dependency_failure, batch,
        )
        return str(self._call(self._pool, "POST", "/jobs", body)["id"])

    def push_bulk(self, jobs: Sequence[Mapping[str, Any]]) -> list[str]:
        """Pushes 1..1000 jobs at once, all or nothing. Each job is a mapping with `payload`
        and, optionally, `delay_ms`, `priority`, `dedupe_key`, `max_attempts`, `group`,
        `depends_on`, `on_dependency_failure`, `batch` (as `push`)."""
        items = []
        for job in jobs:
            unknown = set(job) - set(_PUSH_FIELDS)
            if unknown or "payload" not in job:
                raise ValueError(
                    f"a job is a mapping of {', '.join(_PUSH_FIELDS)} (payload required); "
                    f"got {sorted(job)}"
                )
            item = dict(job)
            if item.get("depends_on") is not None:
                item["depends_on"] = _job_ids(item["depends_on"])
            items.append(item)
        answer = self._call(self._pool, "POST", "/jobs", {"jobs": items})
        return [str(i) for i in answer["ids"]]

    # -- reading ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """`{"queue", "waiting_deps", "ready", "delayed", "inflight", "dead", "pushed", "acked",
        "nacked", "expired", "cancelled", "workers", "paused"}`."""
        result: dict[str, Any] = self._call(self._pool, "GET", "")
        return result

    def inflight(self, worker: str | None = None) -> list[dict[str, Any]]:
        """Jobs in flight (`id`, `worker`, `attempt`, `lease_expires_ms`), of one worker when
        given."""
        path = "/inflight" if worker is None else f"/inflight?worker={quote(worker)}"
        return list(self._call(self._pool, "GET", path)["jobs"])

    def settings(self) -> dict[str, Any]:
        """The settings in force: `{"queue", "fairness", "limits", "keep_acked"}`; a queue
        nobody set them for has `{"fairness": "fifo", "limits": [], "keep_acked": {"count":
        1000, "age_ms": 86400000}}`."""
        result: dict[str, Any] = self._call(self._pool, "GET", "/settings")
        return result

    def dead(self, limit: int = 100) -> list[dict[str, Any]]:
        """Dead letters, oldest failure first: `id`, `payload`, `attempts`, `error`,
        `failed_at_ms`, `history`."""
        return list(self._call(self._pool, "GET", f"/dead?limit={int(limit)}")["jobs"])

    def get_job(self, job_id: str) -> dict[str, Any]:
        """One job wherever it is: `{"id", "state", "payload", "priority", "group"?,
        "attempts", "max_attempts", "ready_at_ms"?, "lease_expires_ms"?, "finished_at_ms"?,
        "last_error"?, "history", "progress"?, "result"?, "log": [{"at_ms", "line"}],
        "log_dropped"}`. `state` is `waiting_deps`, `delayed`, `ready`, `inflight`, `acked`,
        `dead` or `cancelled`. Raises `AnteroomError` 404 `unknown_job` for a job never pushed,
        or finished and no longer kept (the queue's `keep_acked`)."""
        result: dict[str, Any] = self._call(self._pool, "GET", f"/jobs/{quote(str(job_id))}")
        return result

    def wait_for_result(
        self, job_id: str, timeout: float = 30.0, poll_interval: float = 0.25
    ) -> Any:
        """Polls `get_job` every `poll_interval` seconds until the job is finished, and answers
        its result (None when its handler gave none). Raises `JobFailed` for a job that is
        `dead` (its `last_error` says why) or `cancelled`, `TimeoutError` when it is not
        finished within `timeout` seconds, and `AnteroomError` 404 `unknown_job` for a job the
        queue does not hold (or no longer keeps: see `keep_acked`)."""
        if poll_interval <= 0:
            raise ValueError("poll_interval must be > 0")
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            state = job.get("state")
            if state == "acked":
                return job.get("result")
            if state in _FINISHED:
                raise JobFailed(job)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"job {job_id} is still {state} after {timeout:g} s (attempt "
                    f"{job.get('attempts')} of {job.get('max_attempts')})"
                )
            time.sleep(min(poll_interval, left))

    # -- dependencies and batches -----------------------------------------------------------

    def get_job_dependencies(self, job_id: str) -> list[dict[str, Any]]:
        """What became of each job `job_id` depends on, in the order named: `[{"id", "state",
        "result"?}]`, `state` `pending`, `acked`, `dead`, `cancelled` or `missing`, `result`
        what an acked one's handler gave. A dependent's worker reads its inputs here: the
        results are kept with the dependent, however few finished jobs the queue keeps. A job
        pushed without `depends_on` answers `[]`; one the queue does not hold raises
        `AnteroomError` 404 `unknown_job`."""
        path = f"/jobs/{quote(str(job_id))}/dependencies"
        return list(self._call(self._pool, "GET", path)["dependencies"])

    def create_batch(
        self,
        batch_id: str | None = None,
        *,
        on_success: Mapping[str, Any] | None = None,
        on_complete: Mapping[str, Any] | None = None,
        on_dead: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Opens a batch of this queue (a random id without `batch_id`); answers it as
        `get_batch` does. Jobs join it with `push(..., batch=id)` until `seal_batch`.

        Each callback is a job pushed to this queue, once: `{"payload", "priority"?,
        "max_attempts"?, "group"?}`. `on_complete` when the sealed batch has no job pending;
        `on_success` then too when none of its jobs died or was cancelled; `on_dead` when its
        first job dies. A batch id already taken raises `AnteroomError` 409 `conflict` (so does
        a retried call whose first answer was lost); a queue with 10,000 open batches 429
        `limit_reached`."""
        body: dict[str, Any] = {}
        if batch_id is not None:
            body["id"] = batch_id
        for name, template in (
            ("on_success", on_success), ("on_complete", on_complete), ("on_dead", on_dead)
        ):
            if template is not None:
                body[name] = dict(template)
        result: dict[str, Any] = self._call(self._pool, "POST", "/batches", body)
        return result

    def seal_batch(self, batch_id: str) -> dict[str, Any]:
        """No job joins the batch after (a push naming it raises `AnteroomError` 409
        `conflict`); once none of its jobs is pending it settles and its callbacks are pushed.
        Sealing a sealed batch changes nothing. Answers the batch; `AnteroomError` 404
        `unknown_batch` for one the queue does not hold."""
        path = f"/batches/{quote(batch_id)}/seal"
        result: dict[str, Any] = self._call(self._pool, "POST", path)
        return result

    def get_batch(self, batch_id: str) -> dict[str, Any]:
        """`{"id", "sealed", "settled", "pending", "acked", "dead", "cancelled",
        "created_at_ms", "settled_at_ms"?, "callbacks_pushed": {"on_success"?: id,
        "on_complete"?: id, "on_dead"?: id}}`. A settled batch is kept for the queue's
        `keep_acked` age, then raises `AnteroomError` 404 `unknown_batch` as an unknown one
        does."""
        result: dict[str, Any] = self._call(self._pool, "GET", f"/batches/{quote(batch_id)}")
        return result

    # -- admin ------------------------------------------------------------------------------

    def pause(self) -> dict[str, Any]:
        """Stops deliveries (pushes are still taken); answers the stats."""
        result: dict[str, Any] = self._call(self._admin, "POST", "/pause")
        return result

    def resume(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self._admin, "POST", "/resume")
        return result

    def set_settings(
        self,
        *,
        fairness: str | None = None,
        limits: Sequence[Mapping[str, Any]] | None = None,
        keep_acked: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """(admin) Replaces the queue's settings; answers them as now in force.

        `fairness`: `"fifo"` or `"round_robin"` (groups take turns). `limits`: at most one
        `{"key": "group", ...}` (each group held on its own) and one `{"key": None, ...}` (all
        of the queue's jobs together), each with `"rate": {"limit", "period_ms", "burst"?}`, a
        `"concurrency"`, or both. `keep_acked`: `{"count"?: 0..1,000,000 (default 1000),
        "age_ms"?: 1..2,592,000,000 (default a day)}`, how many finished (acked or cancelled)
        jobs `get_job` still finds, and for how long. What is left out goes back to its
        default: `set_settings()` clears them all. A bad setting raises `AnteroomError` 400
        `invalid_argument`.
        """
        body: dict[str, Any] = {}
        if fairness is not None:
            body["fairness"] = fairness
        if limits is not None:
            body["limits"] = [dict(limit) for limit in limits]
        if keep_acked is not None:
            body["keep_acked"] = dict(keep_acked)
        result: dict[str, Any] = self._call(self._admin, "PUT", "/settings", body)
        return result

    def redrive(self, ids: Sequence[str] | None = None) -> int:
        """Puts dead letters back in the queue (all of them without `ids`), from attempt 1;
        answers how many."""
        body = None if ids is None else {"ids": [str(i) for i in ids]}
        return int(self._call(self._admin, "POST", "/dead/requeue", body)["count"])

    def cancel(self, job_id: str) -> None:
        """Cancels a ready, delayed or dead job. `AnteroomError` 404 `unknown_job`, or 409
        `conflict` while it is in flight."""
        self._call(self._admin, "DELETE", f"/jobs/{quote(str(job_id))}")

    # -- the worker's calls (Worker uses them; usable alone for a hand-written loop) --------

    def fetch(
        self,
        worker: str,
        max: int = 1,
        *,
        lease_ms: int | None = None,
        wait_ms: int | None = None,
        ack: Sequence[str] = (),
        ack_results: Sequence[Any] | None = None,
        reclaim: bool = False,
        connection: Connection | None = None,
    ) -> dict[str, Any]:
        """`POST .../fetch`: the raw answer (`jobs`, and `acked` when `ack` was given,
        `reclaimed` with `reclaim`). `ack_results`, one per lease of `ack`, are those jobs'
        results, as `ack`'s. Never retried here: a fetch whose answer was lost may have leased
        jobs, which then come back only when their leases run out."""
        body: dict[str, Any] = {"worker": worker, "max": max}
        if lease_ms is not None:
            body["lease_ms"] = lease_ms
        if wait_ms is not None:
            body["wait_ms"] = wait_ms
        if ack:
            body["ack"] = list(ack)
        if ack_results is not None:
            body["ack_results"] = _results_for(ack, ack_results)
        if reclaim:
            body["reclaim"] = True
        # A long poll is answered by its deadline at the latest: the socket waits a bit more.
        timeout = self._pool.timeout + (wait_ms or 0) / 1000
        path = self._path + "/fetch"
        if connection is not None:
            result: dict[str, Any] = connection.request("POST", path, body, timeout=timeout)
        else:
            result = self._pool.request("POST", path, body, timeout=timeout)
        return result

    def ack(
        self, leases: Sequence[str], results: Sequence[Any] | None = None
    ) -> list[dict[str, Any]]:
        """Acks leases; per lease `{"lease", "ok", "code"?}` (`lease_lost`, `invalid_lease`).

        `results`, one per lease (None: none), are kept with the jobs for `get_job` and
        `wait_for_result` while the queue keeps finished jobs (`keep_acked`): any JSON value of
        at most 64 KiB serialized. A larger one refuses the whole call, `AnteroomError` 413
        `payload_too_large`, and acks nothing."""
        body: dict[str, Any] = {"leases": list(leases)}
        if results is not None:
            body["results"] = _results_for(body["leases"], results)
        return list(self._call(self._pool, "POST", "/ack", body)["results"])

    def nack(
        self, leases: Sequence[str], *, delay_ms: int | None = None, error: str | None = None
    ) -> list[dict[str, Any]]:
        """Gives jobs back as failed attempts: retried after `delay_ms`, or the server's
        backoff when None; past `max_attempts` they become dead letters."""
        body: dict[str, Any] = {"leases": list(leases)}
        if delay_ms is not None:
            body["delay_ms"] = delay_ms
        if error is not None:
            body["error"] = error
        return list(self._call(self._pool, "POST", "/nack", body)["results"])

    def snooze(self, leases: Sequence[str], retry_after_ms: int) -> list[dict[str, Any]]:
        """Gives jobs back because an upstream service said to slow down (nack with
        `rate_limited`): each comes back after `retry_after_ms` (0..3,600,000) without using
        up an attempt, and nothing else of its group is handed out before then (nothing of the
        queue, for a job without a group). Per lease as `ack`."""
        body = {"leases": list(leases), "rate_limited": True, "retry_after_ms": retry_after_ms}
        return list(self._call(self._pool, "POST", "/nack", body)["results"])

    def extend(self, leases: Sequence[str], lease_ms: int) -> list[dict[str, Any]]:
        """Extends leases to now + `lease_ms`; per lease as `ack`."""
        body = {"leases": list(leases), "lease_ms": lease_ms}
        return list(self._call(self._pool, "POST", "/extend", body)["results"])

    def progress(self, lease: str, value: Any) -> dict[str, Any]:
        """Reports how far the job of `lease` got: any JSON value of at most 4 KiB serialized
        (larger: `AnteroomError` 413), replacing the last one. Answers `{"ok": True}`, or
        `{"ok": False, "code"}` (`lease_lost`, `invalid_lease`) when the lease is not current.
        A worker's handler calls `job.progress(value)` instead."""
        result: dict[str, Any] = self._call(
            self._pool, "POST", "/progress", {"lease": lease, "progress": value}
        )
        return result

    def log(self, lease: str, *lines: Any) -> dict[str, Any]:
        """Appends lines (`str()` of each) to the log of the job of `lease`; the server keeps
        each line to 1 KiB and the job's last 100 lines (`log_dropped` counts the older ones).
        More than 100 lines go in several requests. Answers as `progress`. A worker's handler
        calls `job.log(...)` instead."""
        texts = [line if isinstance(line, str) else str(line) for line in lines]
        if not texts:
            raise ValueError("log() needs at least one line")
        answer: dict[str, Any] = {"ok": True}
        for start in range(0, len(texts), _LOG_LINES_PER_REQUEST):
            chunk = texts[start : start + _LOG_LINES_PER_REQUEST]
            answer = self._call(self._pool, "POST", "/log", {"lease": lease, "lines": chunk})
            if not answer.get("ok"):
                break
        return answer

    def heartbeat(self, worker: str, ttl_ms: int) -> None:
        """Keeps `worker` alive for `ttl_ms`: silent past it, its leases are released."""
        self._call(self._pool, "POST", f"/workers/{quote(worker)}/heartbeat", {"ttl_ms": ttl_ms})

    def release_worker(self, worker: str) -> int:
        """(admin) Returns a worker's jobs to the queue now; answers how many."""
        return int(self._call(self._admin, "POST", f"/workers/{quote(worker)}/release")["count"])


def _results_for(leases: Sequence[str], results: Sequence[Any]) -> list[Any]:
    out = list(results)
    if len(out) != len(leases):
        raise ValueError(f"one result per lease: {len(leases)} lease(s), {len(out)} result(s)")
    return out
