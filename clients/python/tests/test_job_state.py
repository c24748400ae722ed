"""Job state: a handler's return value as its job's result, read by a producer's
`wait_for_result`; progress and log reported from inside a handler; dead, cancelled and unknown
jobs; results that cannot be kept; `keep_acked` in the settings; the asyncio surface."""

import asyncio
import dataclasses
import pickle
import threading
import time

import pytest

from anteroom import AnteroomError, AsyncQueue, AsyncWorker, Job, JobFailed, Queue, Worker
from conftest import eventually


def run_in_thread(worker: Worker) -> threading.Thread:
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    return t


def stop(worker: Worker, t: threading.Thread) -> None:
    worker.close()
    t.join(10)
    assert not t.is_alive(), "run() did not return after close()"


def test_a_handlers_return_value_is_the_result_a_producer_waits_for(server):
    q = Queue("results", server.url)
    summed = q.push({"add": [1, 2, 3]})
    silent = q.push({"add": None})

    def handler(job: Job) -> object:
        if job.payload["add"] is None:
            return None  # no result
        return {"sum": sum(job.payload["add"]), "text": "héllo"}

    w = Worker(q, handler, concurrency=2, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        assert q.wait_for_result(summed, timeout=10) == {"sum": 6, "text": "héllo"}
        assert q.wait_for_result(silent, timeout=10) is None
    finally:
        stop(w, t)
    job = q.get_job(summed)
    assert job["state"] == "acked"
    assert job["attempts"] == 1
    assert "finished_at_ms" in job
    assert "result" not in q.get_job(silent)


def test_results_ride_on_the_fetch_and_go_alone_when_it_is_parked(server):
    q = Queue("ride", server.url)
    ids = q.push_bulk([{"payload": i} for i in range(4)])
    acks = server.route_count("POST", "/v1/queues/{q}/ack")
    # One slot: each job's ack and result ride on the fetch that frees the slot.
    w = Worker(q, lambda job: job.payload * 10, wait_ms=5000, handle_signals=False)
    t = run_in_thread(w)
    try:
        assert [q.wait_for_result(i, timeout=10) for i in ids] == [0, 10, 20, 30]
        assert server.route_count("POST", "/v1/queues/{q}/ack") == acks
    finally:
        stop(w, t)
    # (The close sent the last ack again: it rode on the fetch the close hung up.)
    acks = server.route_count("POST", "/v1/queues/{q}/ack")
    # Two slots and one job: the next fetch is parked when the job ends, so its ack and result
    # go alone.
    w = Worker(q, lambda job: {"alone": job.payload}, concurrency=2, wait_ms=5000,
               handle_signals=False)
    t = run_in_thread(w)
    try:
        last = q.push(4)
        assert q.wait_for_result(last, timeout=10) == {"alone": 4}
        eventually(lambda: server.route_count("POST", "/v1/queues/{q}/ack") == acks + 1,
                   what="the ack alone")
    finally:
        stop(w, t)


def test_progress_and_log_from_a_handler_show_in_get_job(server):
    q = Queue("reports", server.url)
    job_id = q.push({"rows": 150})
    reported = threading.Event()
    go_on = threading.Event()
    answers: list[bool] = []

    def handler(job: Job) -> str:
        answers.append(job.progress({"done": 40, "of": 100}))
        answers.append(job.log("connected", 42))
        # More lines than one request takes: sent in several, the last 100 kept.
        answers.append(job.log(*(f"row {i}" for i in range(150))))
        reported.set()
        go_on.wait(10)
        return "done"

    w = Worker(q, handler, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        assert reported.wait(10)
        running = q.get_job(job_id)
        assert running["state"] == "inflight"
        assert "lease_expires_ms" in running
        assert running["progress"] == {"done": 40, "of": 100}
        lines = [entry["line"] for entry in running["log"]]
        assert lines == [f"row {i}" for i in range(50, 150)]
        assert running["log_dropped"] == 52
        assert all(isinstance(entry["at_ms"], int) for entry in running["log"])
        go_on.set()
        assert q.wait_for_result(job_id, timeout=10) == "done"
    finally:
        go_on.set()
        stop(w, t)
    assert answers == [True, True, True]
    assert q.get_job(job_id)["progress"] == {"done": 40, "of": 100}


def test_a_job_that_can_report_is_still_a_plain_dataclass(server):
    q = Queue("plain", server.url)
    q.push({"n": 1})
    wire = q.fetch("w")["jobs"][0]
    job = Job.from_wire(wire, q)
    bare = Job.from_wire(wire)
    assert job == bare and repr(job) == repr(bare)
    assert dataclasses.asdict(job) == dataclasses.asdict(bare)
    copy = pickle.loads(pickle.dumps(job))
    assert copy == job
    with pytest.raises(RuntimeError):
        copy.progress(1)  # its queue stayed behind
    assert job.progress(1) is True


def test_reports_on_a_lease_no_longer_current_answer_lease_lost(server):
    q = Queue("late", server.url)
    q.push(1)
    job = Job.from_wire(q.fetch("w")["jobs"][0], q)
    assert q.ack([job.lease], [{"by": "hand"}])[0]["ok"]
    assert job.progress(100) is False
    assert q.progress(job.lease, 100) == {"ok": False, "code": "lease_lost"}
    assert q.log(job.lease, "late") == {"ok": False, "code": "lease_lost"}
    assert q.log("forged", "x") == {"ok": False, "code": "invalid_lease"}
    assert q.get_job(job.id)["result"] == {"by": "hand"}
    q.push(2)
    bare = Job.from_wire(q.fetch("w")["jobs"][0])  # fetched by hand: no queue to report to
    with pytest.raises(RuntimeError, match="came from no worker"):
        bare.log("x")
    with pytest.raises(ValueError):
        q.log(job.lease)


def test_wait_for_result_raises_for_a_job_that_dies_with_its_last_error(server):
    q = Queue("dies", server.url)
    job_id = q.push({"x": 1}, max_attempts=1)

    def handler(job: Job) -> None:
        raise RuntimeError("the upstream said no")

    w = Worker(q, handler, wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        with pytest.raises(JobFailed) as err:
            q.wait_for_result(job_id, timeout=10)
    finally:
        stop(w, t)
    assert err.value.state == "dead"
    assert err.value.job_id == job_id
    assert "RuntimeError: the upstream said no" in (err.value.last_error or "")
    assert "the upstream said no" in str(err.value)
    assert err.value.job["attempts"] == 1


def test_wait_for_result_raises_for_a_cancelled_job(server):
    q = Queue("cancelled", server.url)
    job_id = q.push("later", delay_ms=60_000)
    assert q.get_job(job_id)["state"] == "delayed"
    assert "ready_at_ms" in q.get_job(job_id)
    q.cancel(job_id)
    with pytest.raises(JobFailed, match="cancelled") as err:
        q.wait_for_result(job_id, timeout=5)
    assert err.value.state == "cancelled"


def test_wait_for_result_times_out(server):
    q = Queue("nobody-works", server.url)
    job_id = q.push("waits")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="still ready"):
        q.wait_for_result(job_id, timeout=0.3, poll_interval=0.05)
    assert time.monotonic() - started < 2
    with pytest.raises(ValueError):
        q.wait_for_result(job_id, poll_interval=0)


def test_get_job_of_an_unknown_job_raises_404(server):
    q = Queue("unknown", server.url)
    for job_id in ("999", "not-a-number"):
        with pytest.raises(AnteroomError) as err:
            q.get_job(job_id)
        assert (err.value.status, err.value.code) == (404, "unknown_job")
    with pytest.raises(AnteroomError) as err:
        q.wait_for_result("999", timeout=1)
    assert err.value.status == 404


def test_keep_acked_round_trips_and_bounds_what_get_job_finds(server):
    q = Queue("keep", server.url)
    assert q.settings()["keep_acked"] == {"count": 1000, "age_ms": 86_400_000}
    answer = q.set_settings(fairness="round_robin", keep_acked={"count": 5, "age_ms": 60_000})
    assert answer["keep_acked"] == {"count": 5, "age_ms": 60_000}
    assert answer["fairness"] == "round_robin"
    assert q.settings() == answer
    # Left out, it goes back to its default (a PUT replaces every setting).
    assert q.set_settings(keep_acked={"count": 0})["keep_acked"] == {
        "count": 0, "age_ms": 86_400_000
    }
    job_id = q.push(1)
    lease = q.fetch("w")["jobs"][0]["lease"]
    q.ack([lease], ["kept?"])
    with pytest.raises(AnteroomError) as err:
        q.get_job(job_id)
    assert err.value.status == 404, "count 0 keeps no finished job"
    for bad in ({"count": -1}, {"age_ms": 0}, {"count": 2_000_000}, {"cuont": 5}):
        with pytest.raises(AnteroomError) as err:
            q.set_settings(keep_acked=bad)
        assert (err.value.status, err.value.code) == (400, "invalid_argument"), bad
    assert q.settings()["keep_acked"]["count"] == 0


def test_ack_and_fetch_take_results_one_per_lease(server):
    q = Queue("raw", server.url)
    a, b, c = q.push_bulk([{"payload": "a"}, {"payload": "b"}, {"payload": "c"}])
    jobs = q.fetch("w", 2)["jobs"]
    answer = q.fetch("w", 1, ack=[jobs[0]["lease"]], ack_results=[[1, 2]])
    assert answer["acked"][0]["ok"]
    assert q.get_job(a)["result"] == [1, 2]
    with pytest.raises(ValueError, match="one result per lease"):
        q.ack([jobs[1]["lease"]], [1, 2])
    with pytest.raises(AnteroomError) as err:
        q.ack([jobs[1]["lease"]], ["x" * (65 * 1024)])
    assert (err.value.status, err.value.code) == (413, "payload_too_large")
    assert q.get_job(b)["state"] == "inflight", "a refused ack acks nothing"
    assert q.ack([jobs[1]["lease"]], [None])[0]["ok"]
    assert "result" not in q.get_job(b)
    assert q.get_job(c)["state"] == "inflight"


def test_a_result_that_cannot_be_kept_fails_its_job_with_a_clear_error(server):
    q = Queue("unkept", server.url)
    too_big = q.push("big", max_attempts=1)
    not_json = q.push("set", max_attempts=1)
    # Just under 64 KiB as Python writes it (64,001 bytes): kept, its numbers as sent (the
    # server stores a result's text, not what its parser makes of 1.5).
    floats = q.push("floats", max_attempts=1)
    fine = q.push("fine")
    results = {
        "big": "x" * (64 * 1024),
        "set": {1, 2},
        "floats": [1.5] * 16_000,
        "fine": "ok",
    }

    w = Worker(q, lambda job: results[job.payload], wait_ms=200, handle_signals=False)
    t = run_in_thread(w)
    try:
        for job_id, words in ((too_big, "over 64 KiB (65538 bytes as JSON)"),
                              (not_json, "not JSON")):
            with pytest.raises(JobFailed) as err:
                q.wait_for_result(job_id, timeout=10)
            assert words in (err.value.last_error or ""), err.value.last_error
            assert "the handler's result cannot be kept" in (err.value.last_error or "")
        assert q.wait_for_result(fine, timeout=10) == "ok"
        assert q.wait_for_result(floats, timeout=10) == [1.5] * 16_000
    finally:
        stop(w, t)
    assert w.failed == 2 and w.processed == 2


def test_the_async_worker_keeps_results_and_reports(server):
    async def main() -> None:
        q = AsyncQueue("aio-results", server.url)
        ids = [await q.push({"n": n}) for n in range(3)]
        dies = await q.push({"n": -1}, max_attempts=1)

        async def handler(job: Job) -> object:
            if job.payload["n"] < 0:
                raise ValueError("negative")
            assert await job.aprogress({"n": job.payload["n"]})
            assert await job.alog("squared", job.payload["n"] ** 2)
            return job.payload["n"] ** 2

        w = AsyncWorker(q, handler, concurrency=2, wait_ms=200, handle_signals=False)
        task = asyncio.create_task(w.run())
        try:
            async with asyncio.timeout(10):
                assert [await q.wait_for_result(i, 5, 0.05) for i in ids] == [0, 1, 4]
                with pytest.raises(JobFailed, match="negative"):
                    await q.wait_for_result(dies, 5, 0.05)
        finally:
            async with asyncio.timeout(5):
                await w.close()
                await task
        job = await q.get_job(ids[2])
        assert job["progress"] == {"n": 2}
        assert [e["line"] for e in job["log"]] == ["squared", "4"]
        with pytest.raises(TimeoutError):
            await q.wait_for_result(await q.push("nobody"), 0.2, 0.05)
        settings = await q.set_settings(keep_acked={"count": 7})
        assert settings["keep_acked"]["count"] == 7

    asyncio.run(main())
