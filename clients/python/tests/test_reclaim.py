"""A worker restarted under its stable id takes back the jobs it held before a crash at once
(its first fetch sends `reclaim`), instead of leaving them until their leases run out."""

import threading
import urllib.error

import pytest

from anteroom import Job, Queue, Worker
from conftest import eventually


def reclaim_unsupported(server) -> str | None:
    """Why the server cannot reclaim, or None when it can."""
    try:
        answer = server.api("POST", "/v1/queues/probe/fetch", {"worker": "p", "reclaim": True})
    except urllib.error.HTTPError as err:
        if err.code == 400:
            return f"the server refuses 'reclaim' (400: {err.read().decode()})"
        raise
    if "reclaimed" not in answer:
        return f"the server ignores 'reclaim' (no 'reclaimed' in {answer})"
    return None


@pytest.fixture
def reclaiming(server):
    reason = reclaim_unsupported(server)
    if reason:
        pytest.skip(reason)
    return server


def run(worker: Worker) -> threading.Thread:
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


def test_a_restarted_worker_takes_back_its_jobs_first(reclaiming):
    q = Queue("reclaim", reclaiming.url)
    ids = q.push_bulk([{"payload": i} for i in range(3)])
    # The crashed run: two jobs leased for 30 s under the stable name, never finished.
    old = q.fetch("w-stable", 2, lease_ms=30_000)["jobs"]
    assert [j["id"] for j in old] == ids[:2]

    done: list[Job] = []
    w = Worker(q, done.append, concurrency=2, worker_id="w-stable", wait_ms=200,
               handle_signals=False)
    t = run(w)
    try:
        eventually(lambda: q.stats()["acked"] == 3, timeout=5, what="three acks")
    finally:
        w.close()
        t.join(10)
    assert w.reclaimed == 2
    # The held jobs came first, each as a new attempt; then the third.
    assert [(j.id, j.attempt) for j in done[:2]] == [(ids[0], 2), (ids[1], 2)]
    assert (done[2].id, done[2].attempt) == (ids[2], 1)
    # The old leases are void.
    assert [r["ok"] for r in q.ack([j["lease"] for j in old])] == [False, False]
    stats = q.stats()
    assert stats["pushed"] == stats["acked"] == 3


def test_a_reclaimed_job_past_max_attempts_is_dead(reclaiming):
    q = Queue("reclaim-dead", reclaiming.url)
    (job_id,) = q.push_bulk([{"payload": "once", "max_attempts": 1}])
    q.fetch("w-once", 1, lease_ms=30_000)
    done: list[Job] = []
    w = Worker(q, done.append, worker_id="w-once", wait_ms=200, handle_signals=False)
    t = run(w)
    try:
        dead = eventually(lambda: q.dead(), timeout=5, what="the dead letter")
    finally:
        w.close()
        t.join(10)
    assert [d["id"] for d in dead] == [job_id]
    assert done == []
