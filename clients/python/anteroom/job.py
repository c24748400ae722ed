"""A delivered job: what a fetch answers for each job, as a dataclass, and what its handler may
report about it while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .queue import Queue


@dataclass
class Job:
    """One delivery of a job. `lease` is this delivery's proof of ownership: only it acks,
    nacks or extends the job. `attempt` is 1 for the first delivery. `lease_expires_ms` is
    absolute (ms since the epoch): the server's deadline as fetched; after each extension by
    `Worker`, an estimate by this machine's clock (the extend answer carries no deadline).
    `group` is the group the job was pushed with (a tenant, a customer), None without one.

    A job a worker hands its handler can report on itself while it runs: `progress(value)` and
    `log(*lines)` (blocking), `aprogress` and `alog` (coroutines, for asyncio handlers). Each
    answers True, or False when the lease is no longer current (the job is not this
    delivery's any more: it ran out, or was handed back).
    """

    id: str
    payload: Any
    attempt: int
    lease: str
    lease_expires_ms: int
    priority: int
    group: str | None = None

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any], queue: Queue | None = None) -> Job:
        """The job of a fetch answer; with `queue` (the one it was fetched from), a job that can
        report on itself."""
        job = cls(
            id=str(obj["id"]),
            payload=obj.get("payload"),
            attempt=int(obj["attempt"]),
            lease=str(obj["lease"]),
            lease_expires_ms=int(obj["lease_expires_ms"]),
            priority=int(obj.get("priority", 0)),
            group=None if obj.get("group") is None else str(obj["group"]),
        )
        if queue is not None:
            # Not a dataclass field: asdict(), ==, repr() and the constructor see the delivery
            # alone, and a job compares equal to its plain copy.
            job.__dict__["_queue"] = queue
        return job

    def __getstate__(self) -> dict[str, Any]:
        # A job pickled (to a process pool, say) goes without its queue: connections and locks
        # do not travel.
        state = dict(self.__dict__)
        state.pop("_queue", None)
        return state

    def _reports_to(self) -> Queue:
        queue: Queue | None = self.__dict__.get("_queue")
        if queue is None:
            raise RuntimeError(
                "this job came from no worker: report with queue.progress(job.lease, ...) and "
                "queue.log(job.lease, ...)"
            )
        return queue

    def progress(self, value: Any) -> bool:
        """Reports how far the job got: any JSON value of at most 4 KiB (serialized), which
        replaces the last one reported; `Queue.get_job` shows it."""
        return bool(self._reports_to().progress(self.lease, value)["ok"])

    def log(self, *lines: Any) -> bool:
        """Appends lines to the job's log (`str()` of each; the server keeps each to 1 KiB and
        the job's last 100 lines)."""
        return bool(self._reports_to().log(self.lease, *lines)["ok"])

    async def aprogress(self, value: Any) -> bool:
        """`progress` for asyncio handlers: the request runs in a thread."""
        return await asyncio.to_thread(self.progress, value)

    async def alog(self, *lines: Any) -> bool:
        """`log` for asyncio handlers: the request runs in a thread."""
        return await asyncio.to_thread(self.log, *lines)
