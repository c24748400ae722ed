"""The client's error types: the server's `{"error": {"code", "message"}}` answers, the one a
worker's handler raises to snooze its job, and a job that failed for good."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# The longest snooze the server takes (docs/api.md, nack's `retry_after_ms`).
MAX_RETRY_AFTER_MS = 3_600_000


class AnteroomError(Exception):
    """An answer the server refused with, as docs/api.md's Errors table lists them.

    `status` is the HTTP status, `code` the machine-readable code (`unknown_room`,
    `invalid_argument`, ...), `message` the server's words. `retry_after` is the `Retry-After`
    header in seconds when the server sent one (429, 503), else None.
    """

    def __init__(
        self, status: int, code: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[type[AnteroomError], tuple[int, str, str, float | None]]:
        # Picklable with its fields (the default would pass only the formatted text).
        return (type(self), (self.status, self.code, self.message, self.retry_after))


class RateLimited(Exception):
    """Raised by a worker's handler when an upstream service said to slow down (a 429): the
    worker then snoozes the job instead of nacking it. The job comes back after
    `retry_after_ms` without using up an attempt, and the server hands out nothing else of its
    group until then (nothing of the queue, for a job without a group).

    `retry_after_ms` is 0..3,600,000 (a fraction is rounded up): an upstream `Retry-After` of
    `s` seconds is `RateLimited(s * 1000)`.
    """

    def __init__(self, retry_after_ms: float, message: str | None = None) -> None:
        ms = math.ceil(retry_after_ms)
        if not 0 <= ms <= MAX_RETRY_AFTER_MS:
            raise ValueError(
                f"retry_after_ms must be 0..{MAX_RETRY_AFTER_MS}, not {retry_after_ms}"
            )
        super().__init__(message or f"rate limited: retry after {ms} ms")
        self.retry_after_ms = ms

    def __reduce__(self) -> tuple[type[RateLimited], tuple[int, str]]:
        return (type(self), (self.retry_after_ms, str(self)))


class JobFailed(Exception):
    """Raised by `Queue.wait_for_result` for a job that will have no result: it is `dead`
    (every attempt failed; `last_error` is its last attempt's error) or `cancelled`. `job` is
    the job as `Queue.get_job` answered it."""

    def __init__(self, job: Mapping[str, Any]) -> None:
        self.job = dict(job)
        self.job_id = str(job.get("id"))
        self.state = str(job.get("state"))
        last = job.get("last_error")
        self.last_error: str | None = None if last is None else str(last)
        if self.state == "dead":
            text = f"job {self.job_id} is dead after {job.get('attempts')} attempt(s)"
            if self.last_error is not None:
                text += f"; its last error: {self.last_error}"
        else:
            text = f"job {self.job_id} was {self.state}"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[JobFailed], tuple[dict[str, Any]]]:
        return (type(self), (self.job,))


def is_transient(exc: BaseException) -> bool:
    """Whether trying again later may succeed: the server unreachable, or answering 503.

    A 503 means overload, a lost backend or a full disk (docs/api.md): nothing changed, or (a
    change that waited for the disk) the outcome is unknown, which is why pushes retried this
    way should carry a `dedupe_key`.
    """
    if isinstance(exc, AnteroomError):
        return exc.status == 503
    # Refused, reset, timed out, DNS: everything the socket layer raises.
    return isinstance(exc, OSError)
