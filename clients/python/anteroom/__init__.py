"""anteroom: the Python client of the anteroom server (waiting rooms and reliable queues).

Standard library only. `Queue` and `Worker` for jobs, `Scheduler` for schedules of repeatable
jobs, `Room` for waiting rooms; `AsyncQueue`, `AsyncWorker`, `AsyncScheduler`, `AsyncRoom` (in
`anteroom.aio`, also here) for asyncio.
"""

from .aio import AsyncQueue, AsyncRoom, AsyncScheduler, AsyncWorker
from .errors import AnteroomError, JobFailed, RateLimited, is_transient
from .job import Job
from .queue import Queue
from .room import Room, Updates
from .schedules import Scheduler
from .sse import Event, SseParser
from .worker import Worker

__all__ = [
    "AnteroomError",
    "AsyncQueue",
    "AsyncRoom",
    "AsyncScheduler",
    "AsyncWorker",
    "Event",
    "Job",
    "JobFailed",
    "Queue",
    "RateLimited",
    "Room",
    "Scheduler",
    "SseParser",
    "Updates",
    "Worker",
    "is_transient",
]

__version__ = "0.1.0"
