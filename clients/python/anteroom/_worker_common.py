"""What the thread and asyncio workers share: option checks, default ids, error texts."""

from __future__ import annotations

import json
import os
import socket
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

# The error a job handed back at close carries, so the dead-letter history says why.
CLOSED_BEFORE_FINISH = "worker closed before the job finished"
CLOSED_BEFORE_START = "worker closed before the job started"

# A handler's traceback is sent as the nack's error. The server keeps 8 KiB of it; the
# client keeps the last 4 KiB (where the exception itself is) so a deep stack costs no more.
ERROR_LIMIT = 4096

# How long a finished job's ack waits to ride on the next fetch before it is sent alone: a
# fetch parked in a long poll may not come back for `wait_ms`, and the lease runs meanwhile.
ACK_HOLD_S = 0.25


# A handler's result is kept by the server up to 64 KiB (serialized): a larger one refuses the
# whole request it rides on, so the worker measures each result before it sends it.
MAX_RESULT_BYTES = 64 * 1024

# The results riding on one fetch or ack at most, so that a full slate of large results stays
# well inside the server's 16 MiB body limit of queue routes; the rest wait for the next request.
RESULTS_PER_REQUEST_BYTES = 8 * 1024 * 1024


def result_size(value: Any) -> int:
    """The size of a handler's result as the server keeps it (compact JSON, UTF-8), 0 for None
    (no result). Raises ValueError, with a message for the job's error, when it cannot be kept:
    not JSON, or over 64 KiB. The server measures its own serialization, which may write a
    fraction a few bytes longer: a result that close to the limit is caught by the 413 the
    worker then gets (`ack_alone`)."""
    if value is None:
        return 0
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"the handler's result cannot be kept: it is not JSON ({exc}); return a "
            "JSON-serializable value, or None for no result"
        ) from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise ValueError(result_too_large(size))
    return size


def result_too_large(size: int | None) -> str:
    measured = "" if size is None else f" ({size} bytes as JSON)"
    return (
        f"the handler's result cannot be kept: it is over 64 KiB{measured}, the most the "
        "server keeps; store it elsewhere and return a reference to it"
    )


@dataclass
class PendingAck:
    """A finished job's ack waiting to be sent, with its handler's result (None: none)."""

    lease: str
    at: float  # time.monotonic() when it was queued: how long it has waited
    result: Any = None
    size: int = 0  # the result's size as JSON


def take_acks(acks: list[PendingAck]) -> list[PendingAck]:
    """Removes from `acks` those one request carries: all of them, unless their results
    together pass RESULTS_PER_REQUEST_BYTES (then as many as fit, one at least)."""
    total = 0
    n = 0
    for a in acks:
        if n and total + a.size > RESULTS_PER_REQUEST_BYTES:
            break
        total += a.size
        n += 1
    taken = acks[:n]
    del acks[:n]
    return taken


def ack_results(acks: list[PendingAck]) -> list[Any] | None:
    """The results field of a request carrying `acks`: None when no job has one, so a worker
    whose handlers return nothing sends what older servers take."""
    if all(a.result is None for a in acks):
        return None
    return [a.result for a in acks]


def is_result_refused(exc: BaseException) -> bool:
    """A request refused whole because a result it carried is over the server's 64 KiB."""
    from .errors import AnteroomError

    return isinstance(exc, AnteroomError) and exc.status == 413


def default_worker_id() -> str:
    """HOST-PID-RANDOM: unique per process, so two workers never share leases by accident. A
    worker that should take back its own jobs after a crash is given a stable id instead."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    if len(text) <= ERROR_LIMIT:
        return text
    # Too long: the exception's own line first (its type and the start of its message, what
    # a dead-letter list is read for), then as much of the traceback's end as fits.
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:1024]
    marker = "\n[traceback cut]\n"
    return head + marker + text[-(ERROR_LIMIT - len(head) - len(marker)) :]


def check_options(
    concurrency: int, lease_ms: int, heartbeat_ms: int, wait_ms: int, shutdown_grace_s: float
) -> None:
    # The server's ranges (docs/api.md), so a mistake fails here rather than at every fetch.
    if not 1 <= concurrency <= 1000:
        raise ValueError("concurrency must be 1..1000 (a fetch takes at most 1000 jobs)")
    if not 100 <= lease_ms <= 43_200_000:
        raise ValueError("lease_ms must be 100..43200000")
    if not 1 <= heartbeat_ms <= 604_800_000:
        raise ValueError("heartbeat_ms must be 1..604800000")
    if not 0 <= wait_ms <= 60_000:
        raise ValueError("wait_ms must be 0..60000")
    if shutdown_grace_s < 0:
        raise ValueError("shutdown_grace_s must be >= 0")


def is_reclaim_refused(exc: BaseException) -> bool:
    """A server from before `reclaim` may refuse the field as unknown (400
    `invalid_argument`); the fetch is then sent again without it, and fails for good if the
    400 was about something else."""
    from .errors import AnteroomError

    return isinstance(exc, AnteroomError) and exc.status == 400 and exc.code == "invalid_argument"
