"""A worker process for the tests: `worker_proc.py LOG OPTIONS_JSON`. The handler appends
`{"event": "start"|"end", "id", "attempt"}` lines to LOG and sleeps the payload's `ms` (on
the first attempt only, when the payload says `first_only`)."""

import json
import logging
import sys
import time

from anteroom import Job, Queue, Worker

log_path = sys.argv[1]
options = json.loads(sys.argv[2])
url = options.pop("url")
queue = Queue(options.pop("queue"), url)
logging.basicConfig(level=logging.INFO, stream=sys.stderr)


def note(event: str, job: Job) -> None:
    with open(log_path, "a") as f:
        f.write(json.dumps({"event": event, "id": job.id, "attempt": job.attempt}) + "\n")


def handler(job: Job) -> None:
    note("start", job)
    ms = job.payload.get("ms", 0)
    if not (job.payload.get("first_only") and job.attempt > 1):
        time.sleep(ms / 1000)
    note("end", job)


Worker(queue, handler, **options).run()
print("run returned", file=sys.stderr)
