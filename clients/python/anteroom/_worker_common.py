"""What the thread and asyncio workers share: option checks, default ids, error texts."""

from __future__ import annotations

import os
import socket
import traceback
import uuid

# The error a job handed back at close carries, so the dead-letter history says why.
CLOSED_BEFORE_FINISH = "worker closed before the job finished"
CLOSED_BEFORE_START = "worker closed before the job started"

# A handler's traceback is sent as the nack's error. The server keeps 8 KiB of it; the
# client keeps the last 4 KiB (where the exception itself is) so a deep stack costs no more.
ERROR_LIMIT = 4096

# How long a finished job's ack waits to ride on the next fetch before it is sent alone: a
# fetch parked in a long poll may not come back for `wait_ms`, and the lease runs meanwhile.
ACK_HOLD_S = 0.25


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
