"""anteroom: the Python client of the anteroom server (waiting rooms and reliable queues).

Standard library only. `Queue` and `Worker` for jobs, `Room` for waiting rooms; `AsyncQueue`,
`AsyncWorker`, `AsyncRoom` (in `anteroom.aio`, also here) for asyncio.
"""

from .aio import AsyncQueue, AsyncRoom, AsyncWorker
from .errors import AnteroomError, RateLimited, is_transient
from .job import Job
from .queue import Queue
from .room import Room, Updates
from .sse import Event, SseParser
from .worker import Worker

__all__ = [
    "AnteroomError",
    "AsyncQueue",
    "AsyncRoom",
    "AsyncWorker",
    "Event",
    "Job",
    "Queue",
    "RateLimited",
    "Room",
    "SseParser",
    "Updates",
    "Worker",
    "is_transient",
]

__version__ = "0.1.0"
