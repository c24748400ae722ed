"""SIGINT drains a worker process: running handlers finish within the grace and nothing new
is taken; with a grace shorter than a job, the job is handed back at once."""

import os
import signal
import time

from anteroom import Queue
from conftest import eventually


def test_sigint_finishes_running_jobs_and_takes_nothing_new(server, worker_procs):
    q = Queue("drain", server.url)
    q.push_bulk([{"payload": {"ms": 1000}} for _ in range(5)])
    w = worker_procs("w", url=server.url, queue="drain", concurrency=2, shutdown_grace_s=5,
                     wait_ms=200)
    eventually(lambda: len(w.started()) == 2, what="two jobs started")
    sent = time.monotonic()
    os.kill(w.proc.pid, signal.SIGINT)
    assert w.proc.wait(8) == 0
    took = time.monotonic() - sent
    assert took < 5, f"exit {took:.2f} s after SIGINT: past the grace"
    assert len(w.started()) == 2 and len(w.ended()) == 2  # finished, nothing new
    stats = q.stats()
    assert (stats["acked"], stats["ready"], stats["inflight"]) == (2, 3, 0)


def test_grace_shorter_than_a_job_hands_it_back_at_once(server, worker_procs):
    q = Queue("short-grace", server.url)
    (job_id,) = q.push_bulk([{"payload": {"ms": 5000}}])
    w = worker_procs("w", url=server.url, queue="short-grace", concurrency=1,
                     shutdown_grace_s=0.3, lease_ms=30_000)
    eventually(lambda: len(w.started()) == 1, what="the job started")
    sent = time.monotonic()
    os.kill(w.proc.pid, signal.SIGINT)
    assert w.proc.wait(5) == 0
    assert time.monotonic() - sent < 2.5
    assert w.ended() == []
    # Back in the queue now, not when its 30 s lease ends: another worker gets it at once.
    stats = q.stats()
    assert (stats["ready"], stats["inflight"], stats["nacked"]) == (1, 0, 1)
    answer = q.fetch("other", 1)
    assert [(j["id"], j["attempt"]) for j in answer["jobs"]] == [(job_id, 2)]
