"""Groups, snoozes and queue settings: a job's group on its way in and out, a handler's
`RateLimited` as a snooze (no attempt used up), per-group limits holding a group back."""

import asyncio
import threading
import time

import pytest

from anteroom import AnteroomError, AsyncQueue, AsyncWorker, Job, Queue, RateLimited, Worker
from conftest import eventually


def run_in_thread(worker: Worker) -> threading.Thread:
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


def stop(worker: Worker, t: threading.Thread) -> None:
    worker.close()
    t.join(10)
    assert not t.is_alive(), "run() did not return after close()"


def test_a_job_pushed_with_a_group_is_delivered_with_it(server):
    q = Queue("grouped", server.url)
    a = q.push({"n": 1}, group="acme")
    b, c = q.push_bulk([{"payload": {"n": 2}, "group": "globex"}, {"payload": {"n": 3}}])
    jobs = [Job.from_wire(j) for j in q.fetch("w", 10)["jobs"]]
    assert [(j.id, j.group) for j in jobs] == [(a, "acme"), (b, "globex"), (c, None)]
    with pytest.raises(ValueError):
        q.push_bulk([{"payload": 1, "tenant": "acme"}])


def test_a_rate_limited_handler_snoozes_its_job_without_using_an_attempt(server):
    q = Queue("snoozed", server.url)
    q.push({"x": 1}, group="acme", max_attempts=1)
    runs: list[tuple[int, str | None, float]] = []

    def handler(job: Job) -> None:
        runs.append((job.attempt, job.group, time.monotonic()))
        if len(runs) == 1:
            raise RateLimited(400)

    w = Worker(q, handler, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        eventually(lambda: q.stats()["acked"] == 1, timeout=10, what="the second run's ack")
    finally:
        stop(w, t)
    # max_attempts 1: a nack would have made it a dead letter; the snooze used up nothing.
    assert [(attempt, group) for attempt, group, _ in runs] == [(1, "acme"), (1, "acme")]
    assert runs[1][2] - runs[0][2] >= 0.35, "back only after the delay"
    assert (w.snoozed, w.failed, w.processed) == (1, 0, 1)
    stats = q.stats()
    assert (stats["nacked"], stats["dead"], stats["expired"], stats["acked"]) == (0, 0, 0, 1)


def test_snooze_holds_the_group_and_keeps_the_attempt(server):
    q = Queue("snooze-call", server.url)
    first = q.push(1, group="acme")
    second = q.push(2, group="acme")
    other = q.push(3, group="globex")
    job = Job.from_wire(q.fetch("w", 1)["jobs"][0])
    assert job.id == first
    assert q.snooze([job.lease], 300) == [{"lease": job.lease, "ok": True}]
    # acme waits for the snooze; globex does not.
    assert [j["id"] for j in q.fetch("w", 10)["jobs"]] == [other]
    again: list[dict] = []

    def both_back() -> bool:
        again.extend(q.fetch("w", 10, wait_ms=200)["jobs"])
        return len(again) == 2

    eventually(both_back, timeout=5, what="acme's jobs after the snooze")
    assert sorted((j["id"], j["attempt"]) for j in again) == [(first, 1), (second, 1)]
    assert q.stats()["nacked"] == 0
    with pytest.raises(AnteroomError) as err:
        q.snooze([again[0]["lease"]], 3_600_001)
    assert (err.value.status, err.value.code) == (400, "invalid_argument")


# What a queue nobody set anything for keeps of its finished jobs.
DEFAULT_KEEP = {"count": 1000, "age_ms": 86_400_000}


def test_a_group_concurrency_of_one_holds_its_second_job_until_the_first_is_acked(server):
    q = Queue("limited", server.url)
    assert q.settings() == {
        "queue": "limited", "fairness": "fifo", "limits": [], "keep_acked": DEFAULT_KEEP
    }
    answer = q.set_settings(fairness="round_robin", limits=[{"key": "group", "concurrency": 1}])
    assert answer == {
        "queue": "limited",
        "fairness": "round_robin",
        "limits": [{"key": "group", "concurrency": 1}],
        "keep_acked": DEFAULT_KEEP,
    }
    assert q.settings() == answer
    a1 = q.push("a1", group="a")
    a2 = q.push("a2", group="a")
    b1 = q.push("b1", group="b")
    jobs = [Job.from_wire(j) for j in q.fetch("w", 10)["jobs"]]
    assert sorted(j.id for j in jobs) == sorted([a1, b1])
    assert q.fetch("w", 10, wait_ms=300)["jobs"] == [], "a's second job is held back"
    assert q.stats()["ready"] == 1
    lease_a1 = next(j.lease for j in jobs if j.id == a1)
    answer = q.fetch("w", 10, wait_ms=2000, ack=[lease_a1])
    assert [j["id"] for j in answer["jobs"]] == [a2]
    # A PUT replaces every setting: nothing sent is back to the defaults.
    assert q.set_settings() == {
        "queue": "limited", "fairness": "fifo", "limits": [], "keep_acked": DEFAULT_KEEP
    }


def test_a_worker_never_runs_two_jobs_of_a_group_at_once_under_its_limit(server):
    q = Queue("limited-worker", server.url)
    q.set_settings(limits=[{"key": "group", "concurrency": 1}])
    q.push_bulk([{"payload": i, "group": "ab"[i % 2]} for i in range(12)])
    lock = threading.Lock()
    running: dict[str | None, int] = {}
    most: dict[str | None, int] = {}

    def handler(job: Job) -> None:
        with lock:
            running[job.group] = running.get(job.group, 0) + 1
            most[job.group] = max(most.get(job.group, 0), running[job.group])
        time.sleep(0.02)
        with lock:
            running[job.group] -= 1

    w = Worker(q, handler, concurrency=6, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        eventually(lambda: w.processed == 12, timeout=15, what="12 jobs")
    finally:
        stop(w, t)
    assert most == {"a": 1, "b": 1}


def test_bad_settings_are_refused(server):
    q = Queue("refused", server.url)
    for settings in (
        {"fairness": "lifo"},
        {"limits": [{"key": "group"}]},  # neither a rate nor a concurrency
        {"limits": [{"key": "tenant", "concurrency": 1}]},
        {"limits": [{"key": None, "rate": {"limit": 0, "period_ms": 1000}}]},
    ):
        with pytest.raises(AnteroomError) as err:
            q.set_settings(**settings)
        assert (err.value.status, err.value.code) == (400, "invalid_argument"), settings
    assert q.settings()["limits"] == []


def test_rate_limited_checks_its_delay():
    assert RateLimited(1.2).retry_after_ms == 2
    assert RateLimited(0).retry_after_ms == 0
    for bad in (-1, 3_600_001):
        with pytest.raises(ValueError):
            RateLimited(bad)


def test_the_async_worker_snoozes_and_the_async_queue_sets_limits(server):
    async def main() -> None:
        q = AsyncQueue("aio-snooze", server.url)
        settings = await q.set_settings(limits=[{"key": None, "concurrency": 2}])
        assert settings["limits"] == [{"key": None, "concurrency": 2}]
        assert await q.settings() == settings
        await q.push({"x": 1}, group="acme")
        runs: list[tuple[int, str | None]] = []

        async def handler(job: Job) -> None:
            runs.append((job.attempt, job.group))
            if len(runs) == 1:
                raise RateLimited(200)

        w = AsyncWorker(q, handler, wait_ms=200, handle_signals=False)
        task = asyncio.create_task(w.run())
        async with asyncio.timeout(10):
            while (await q.stats())["acked"] < 1:
                await asyncio.sleep(0.05)
        async with asyncio.timeout(5):
            await w.close()
            await task
        assert runs == [(1, "acme"), (1, "acme")]
        assert (w.snoozed, w.failed, w.processed) == (1, 0, 1)
        assert (await q.stats())["nacked"] == 0

    asyncio.run(main())
