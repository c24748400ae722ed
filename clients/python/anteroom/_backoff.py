"""Jittered exponential backoff: how long to wait before trying an unreachable server again."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import AnteroomError, is_transient

T = TypeVar("T")


class Backoff:
    """Delays of `base_s * 2**n`, capped at `max_s`, each drawn uniformly from [d/2, d].

    The jitter keeps a fleet of workers that lost the server at the same moment from coming
    back at the same moment ("full jitter" halves the herd without making one worker wait
    for nothing). `reset()` after a success starts again from `base_s`.
    """

    def __init__(self, base_s: float = 0.1, max_s: float = 10.0) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self._attempt = 0

    def next_delay(self, at_least_s: float = 0.0) -> float:
        ceiling = min(self.max_s, self.base_s * (2**self._attempt))
        self._attempt = min(self._attempt + 1, 32)
        return max(at_least_s, random.uniform(ceiling / 2, ceiling))

    def reset(self) -> None:
        self._attempt = 0


def delay_for(exc: BaseException, backoff: Backoff) -> float:
    """The next delay, never shorter than a `Retry-After` the server asked for."""
    retry_after = exc.retry_after if isinstance(exc, AnteroomError) else None
    return backoff.next_delay(retry_after or 0.0)


def call_with_retries(
    call: Callable[[], T],
    retries: int,
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
) -> T:
    """`call()`, tried again up to `retries` times while it fails transiently (see
    `is_transient`); any other error, or the last one, is raised. `stop` set ends the waits."""
    backoff = backoff or Backoff()
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if attempt >= retries or not is_transient(exc):
                raise
            attempt += 1
            delay = delay_for(exc, backoff)
            if stop is not None:
                if stop.wait(delay):
                    raise
            else:
                time.sleep(delay)
