"""`Scheduler`: a server's schedules of repeatable jobs (docs/api.md, "Schedules")."""

from __future__ import annotations

import datetime
import os
from typing import Any

from ._backoff import call_with_retries
from ._http import DEFAULT_URL, Pool, quote

# A time as the server reads it: ms since the epoch, RFC 3339 text, or an aware datetime.
Time = int | str | datetime.datetime


def _wire_time(name: str, value: Time) -> int | str:
    if isinstance(value, datetime.datetime):
        # A naive datetime names no instant: the server would have to guess its zone.
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime (with tzinfo), not {value!r}")
        return value.isoformat(timespec="milliseconds")
    return value


class Scheduler:
    """The schedules of one server: each pushes a job to its queue at every run of a cron
    expression (in a time zone) or of a fixed interval, each run at most once. Thread-safe:
    each call takes a kept-alive connection from a small pool.

    Every route is an admin one: `key` defaults to `$ANTEROOM_ADMIN_KEY`. `retries` > 0
    retries calls that fail because the server is unreachable or answers 503, with jittered
    exponential backoff; all of them may be retried, as putting a schedule again changes
    nothing it ran, but a `delete_schedule` whose first answer was lost then raises 404
    `unknown_schedule`.

    A schedule that does not exist raises `AnteroomError` 404 `unknown_schedule`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 0,
    ) -> None:
        self.url = url
        if key is None:
            key = os.environ.get("ANTEROOM_ADMIN_KEY")
        self.key = key
        self.retries = retries
        self._pool = Pool(url, key, timeout)

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            result: dict[str, Any] = self._pool.request(method, "/v1/schedules" + path, body)
            return result

        return call_with_retries(call, self.retries)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put_schedule(
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
        """Creates schedule `schedule_id` pushing to `queue`, or changes it; answers the schedule.

        Exactly one of `cron` (5 or 6 fields or a macro such as `@daily`, read in `tz`, default
        UTC) and `every_ms` (at least 1000, counted from `start_at`). `start_at` and `end_at`
        (ms since the epoch, RFC 3339 text or an aware datetime) bound the runs; `max_runs`
        ends the schedule after that many. `overlap`: `"allow"` or `"skip"` (no run while the
        previous run's job is ready, delayed or in flight). `misfire`: `"skip"`, `"run_once"`
        or `"run_all"`, for runs later than `misfire_grace_ms` (0..86,400,000); at most
        `max_catchup` (1..1000) fire at once. `jitter_ms` (0..3,600,000) delays each run's job
        by a fixed amount per run. Each run pushes `payload` with `priority`, `group` and
        `max_attempts`.

        A call replaces the whole schedule: what it leaves out goes back to its default.
        Changing a schedule keeps its `runs` and never runs a time twice. A bad value raises
        `AnteroomError` 400 `invalid_argument`; the id of a schedule on another queue 409
        `conflict`; a schedule past the server's 10,000 507 `limit_reached`.
        """
        body: dict[str, Any] = {"queue": queue}
        # Fields left out take the server's defaults, which then stay in one place.
        for name, value in (
            ("cron", cron),
            ("tz", tz),
            ("every_ms", every_ms),
            ("max_runs", max_runs),
            ("overlap", overlap),
            ("misfire", misfire),
            ("misfire_grace_ms", misfire_grace_ms),
            ("max_catchup", max_catchup),
            ("jitter_ms", jitter_ms),
        ):
            if value is not None:
                body[name] = value
        if start_at is not None:
            body["start_at"] = _wire_time("start_at", start_at)
        if end_at is not None:
            body["end_at"] = _wire_time("end_at", end_at)
        job: dict[str, Any] = {"payload": payload}
        if priority is not None:
            job["priority"] = priority
        if group is not None:
            job["group"] = group
        if max_attempts is not None:
            job["max_attempts"] = max_attempts
        body["job"] = job
        return self._call("PUT", f"/{quote(schedule_id)}", body)

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        """The schedule: its fields as put, and `paused`, `runs` (runs pushed so far),
        `last_run_at`, `last_job_id`, `next_run_at` (None once it is over) and
        `next_fire_times` (the next 5, RFC 3339)."""
        return self._call("GET", f"/{quote(schedule_id)}")

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule of the server, by id, as `schedule` answers each."""
        return list(self._call("GET", "")["schedules"])

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Fires nothing until resumed; answers the schedule."""
        return self._call("POST", f"/{quote(schedule_id)}/pause")

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Goes on from now: the times that passed while paused are not run."""
        return self._call("POST", f"/{quote(schedule_id)}/resume")

    def delete_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Deletes the schedule; answers it as it was, with `"deleted": True`. The jobs it
        pushed stay in their queue."""
        return self._call("DELETE", f"/{quote(schedule_id)}")
