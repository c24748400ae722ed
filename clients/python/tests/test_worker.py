"""The thread worker in process: concurrency, lease extension, acks riding on fetches,
failures as nacks."""

import random
import threading
import time

import pytest

from anteroom import AnteroomError, Job, Queue, Worker
from conftest import eventually


def run_in_thread(worker: Worker) -> threading.Thread:
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


def stop(worker: Worker, t: threading.Thread) -> None:
    worker.close()
    t.join(10)
    assert not t.is_alive(), "run() did not return after close()"


def test_concurrency_is_never_exceeded(server):
    q = Queue("conc", server.url)
    q.push_bulk([{"payload": i} for i in range(200)])
    lock = threading.Lock()
    running = 0
    most = 0

    def handler(job: Job) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(random.uniform(0, 0.01))
        with lock:
            running -= 1

    w = Worker(q, handler, concurrency=7, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        eventually(lambda: w.processed == 200, timeout=20, what="200 jobs")
    finally:
        stop(w, t)
    assert most == 7
    stats = q.stats()
    assert stats["acked"] == stats["pushed"] == 200


def test_a_handler_outliving_its_lease_keeps_it(server):
    q = Queue("extend", server.url)
    q.push({"x": 1})
    attempts: list[int] = []

    def handler(job: Job) -> None:
        attempts.append(job.attempt)
        time.sleep(3.5)  # more than two leases

    # A lease long enough that a loaded machine's scheduling stalls do not outlast it.
    w = Worker(q, handler, lease_ms=1500, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        eventually(lambda: q.stats()["acked"] == 1, timeout=10, what="the ack")
        time.sleep(0.5)  # a redelivery would show now
    finally:
        stop(w, t)
    assert attempts == [1]
    stats = q.stats()
    assert (stats["acked"], stats["expired"], stats["ready"], stats["inflight"]) == (1, 0, 0, 0)


def test_the_ack_rides_on_the_next_fetch(server):
    q = Queue("ride", server.url)
    q.push_bulk([{"payload": i} for i in range(8)])
    fetches = server.route_count("POST", "/v1/queues/{q}/fetch")
    acks = server.route_count("POST", "/v1/queues/{q}/ack")
    # Jobs longer than the 250 ms an ack may wait for a fetch: an ack that did not ride would
    # show as a request of its own.
    w = Worker(q, lambda job: time.sleep(0.3), wait_ms=10_000, handle_signals=False)
    t = run_in_thread(w)
    try:
        eventually(lambda: q.stats()["acked"] == 8, timeout=10, what="8 acks")
    finally:
        stop(w, t)
    fetches = server.route_count("POST", "/v1/queues/{q}/fetch") - fetches
    acks = server.route_count("POST", "/v1/queues/{q}/ack") - acks
    # One fetch per job, carrying the previous job's ack, and one more that parks; the last
    # ack goes alone (nothing else to ride on).
    assert fetches <= 9, fetches
    assert acks <= 1, acks


def test_a_raising_handler_nacks_with_its_traceback(server):
    q = Queue("fail", server.url)
    q.push({"x": 1}, max_attempts=1)

    def handler(job: Job) -> None:
        raise ValueError("no good: " + "x" * 10_000)

    w = Worker(q, handler, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        dead = eventually(lambda: q.dead(), timeout=5, what="the dead letter")
    finally:
        stop(w, t)
    assert w.failed == 1 and w.processed == 0
    assert "ValueError: no good" in dead[0]["error"]
    assert "Traceback" in dead[0]["error"] or "[traceback cut]" in dead[0]["error"]
    assert len(dead[0]["error"]) <= 4096
    assert q.redrive() == 1
    assert q.stats()["ready"] == 1


def test_close_interrupts_a_parked_long_poll(server):
    q = Queue("idle", server.url)
    w = Worker(q, lambda job: None, wait_ms=30_000, handle_signals=False)
    t = run_in_thread(w)
    time.sleep(0.3)  # the fetch is parked now
    started = time.monotonic()
    stop(w, t)
    assert time.monotonic() - started < 2


def test_queue_calls_and_errors(server):
    q = Queue("calls", server.url)
    a = q.push({"n": 1}, priority=5, dedupe_key="k1", max_attempts=3)
    assert q.push({"n": 2}, dedupe_key="k1") == a
    b = q.push({"n": 3}, delay_ms=60_000)
    assert q.stats()["delayed"] == 1
    q.cancel(b)
    with pytest.raises(AnteroomError) as err:
        q.cancel(b)
    assert (err.value.status, err.value.code) == (404, "unknown_job")
    assert q.pause()["paused"] is True
    assert q.fetch("w", 1)["jobs"] == []
    assert q.resume()["paused"] is False
    job = Job.from_wire(q.fetch("w", 1)["jobs"][0])
    assert (job.id, job.payload, job.priority) == (a, {"n": 1}, 5)
    assert [j["id"] for j in q.inflight(worker="w")] == [a]
    with pytest.raises(AnteroomError) as err:
        q.cancel(a)
    assert err.value.code == "conflict"
    assert q.ack([job.lease])[0]["ok"] is True
    with pytest.raises(AnteroomError) as err:
        Queue("bad name!", server.url).push(1)
    assert (err.value.status, err.value.code) == (400, "invalid_argument")
