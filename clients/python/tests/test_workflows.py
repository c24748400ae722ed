"""Dependencies and batches against the real server: a job waiting on two others and reading
their results; a dead dependency failing its dependent, and `ignore` letting it run; a batch's
callbacks pushed once, after the seal and the last ack; unknown and sealed batches refused; the
fan-out / fan-in workflow of the README with a `Worker`; the asyncio surface."""

import asyncio
import threading
from typing import Any

import pytest

from anteroom import AnteroomError, AsyncQueue, Job, JobFailed, Queue, Worker


def fetched(q: Queue, max: int = 10) -> list[dict[str, Any]]:
    return list(q.fetch("w", max, lease_ms=60_000)["jobs"])


def without_times(batch: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(batch.pop("created_at_ms"), int)
    settled_at = batch.pop("settled_at_ms", None)
    assert (settled_at is not None) == batch["settled"]
    return batch


def test_a_job_runs_only_after_both_dependencies_are_acked_and_reads_their_results(server):
    q = Queue("deps", server.url)
    a = q.push("extract a")
    b = q.push("extract b")
    c = q.push("load", depends_on=[a, b], priority=10)
    job = q.get_job(c)
    assert (job["state"], job["depends_on"], job["waiting_on"]) == ("waiting_deps", [a, b], 2)
    assert q.stats()["waiting_deps"] == 1
    assert q.get_job_dependencies(c) == [
        {"id": a, "state": "pending"}, {"id": b, "state": "pending"},
    ]

    # Its priority does not matter while it waits: only the dependencies are handed out.
    first = fetched(q)
    assert [j["id"] for j in first] == [a, b]
    leases = {j["id"]: j["lease"] for j in first}
    assert q.ack([leases[a]], [{"rows": 120}])[0]["ok"] is True
    assert fetched(q) == []
    assert q.get_job(c)["waiting_on"] == 1
    assert q.get_job_dependencies(c) == [
        {"id": a, "state": "acked", "result": {"rows": 120}}, {"id": b, "state": "pending"},
    ]

    assert q.ack([leases[b]], [[1, 2]])[0]["ok"] is True
    assert q.get_job(c)["state"] == "ready"
    then = fetched(q)
    assert [(j["id"], j["payload"]) for j in then] == [(c, "load")]
    assert q.get_job_dependencies(c) == [
        {"id": a, "state": "acked", "result": {"rows": 120}},
        {"id": b, "state": "acked", "result": [1, 2]},
    ]
    stats = q.stats()
    assert (stats["waiting_deps"], stats["inflight"], stats["acked"]) == (0, 1, 2)


def test_a_dead_dependency_fails_its_dependent_and_ignore_lets_it_run(server):
    q = Queue("deps-dead", server.url)
    doomed = q.push("doomed", max_attempts=1)
    fine = q.push("fine")
    strict = q.push("strict", depends_on=[doomed, fine])
    lenient = q.push("lenient", depends_on=[doomed, fine], on_dependency_failure="ignore")
    # One more a level down: the strict job's failure fails it in turn.
    below = q.push("below", depends_on=[strict])

    leases = {j["id"]: j["lease"] for j in fetched(q)}
    assert sorted(leases) == sorted([doomed, fine])
    assert q.nack([leases[doomed]], error="boom")[0]["ok"] is True

    assert q.get_job(doomed)["state"] == "dead"
    dead = q.get_job(strict)
    assert (dead["state"], dead["last_error"]) == ("dead", f"dependency {doomed} is dead")
    assert q.get_job(below)["last_error"] == f"dependency {strict} is dead"
    with pytest.raises(JobFailed) as failed:
        q.wait_for_result(strict, timeout=5)
    assert failed.value.last_error == f"dependency {doomed} is dead"
    # The lenient job stopped waiting for the dead one, and still waits for the other.
    assert q.get_job(lenient)["state"] == "waiting_deps"
    assert q.get_job(lenient)["waiting_on"] == 1
    assert fetched(q) == []

    assert q.ack([leases[fine]], ["ok"])[0]["ok"] is True
    assert [j["id"] for j in fetched(q)] == [lenient]
    assert q.get_job_dependencies(lenient) == [
        {"id": doomed, "state": "dead"}, {"id": fine, "state": "acked", "result": "ok"},
    ]
    assert q.stats()["dead"] == 3


def test_a_dependency_the_queue_does_not_know_fails_the_job_at_once(server):
    q = Queue("deps-missing", server.url)
    known = q.push("known")
    job = q.push("needs both", depends_on=[known, "99"])
    assert q.get_job(job)["last_error"] == "dependency 99 is missing"
    assert q.get_job_dependencies(job) == [
        {"id": known, "state": "pending"}, {"id": "99", "state": "missing"},
    ]
    with pytest.raises(AnteroomError) as unknown:
        q.get_job_dependencies("12345")
    assert (unknown.value.status, unknown.value.code) == (404, "unknown_job")
    # The server judges what the client does not check.
    with pytest.raises(AnteroomError) as bad:
        q.push("x", depends_on=[known], on_dependency_failure="sometimes")
    assert (bad.value.status, bad.value.code) == (400, "invalid_argument")
    with pytest.raises(AnteroomError) as bad:
        q.push("x", depends_on=[])
    assert (bad.value.status, bad.value.code) == (400, "invalid_argument")


def test_a_batch_pushes_each_callback_once_after_the_seal_and_the_last_ack(server):
    q = Queue("batches", server.url)
    opened = q.create_batch(
        "import-42",
        on_success={"payload": {"notify": "success"}},
        on_complete={"payload": {"notify": "complete"}, "priority": 5, "max_attempts": 2},
    )
    assert without_times(opened) == {
        "id": "import-42", "sealed": False, "settled": False, "pending": 0, "acked": 0,
        "dead": 0, "cancelled": 0, "callbacks_pushed": {},
    }
    ids = q.push_bulk([{"payload": i, "batch": "import-42"} for i in range(3)])
    ids.append(q.push(3, batch="import-42"))
    jobs = fetched(q)
    assert [j["id"] for j in jobs] == ids
    assert all(r["ok"] for r in q.ack([j["lease"] for j in jobs[:3]]))

    # All but one acked and not sealed: nothing pushed yet.
    assert without_times(q.get_batch("import-42")) == {
        "id": "import-42", "sealed": False, "settled": False, "pending": 1, "acked": 3,
        "dead": 0, "cancelled": 0, "callbacks_pushed": {},
    }
    sealed = without_times(q.seal_batch("import-42"))
    assert (sealed["sealed"], sealed["settled"], sealed["pending"]) == (True, False, 1)
    assert q.stats()["pushed"] == 4

    # The last ack settles it: both callbacks pushed, on_complete first (its priority).
    assert q.ack([jobs[3]["lease"]])[0]["ok"] is True
    settled = without_times(q.get_batch("import-42"))
    pushed = settled.pop("callbacks_pushed")
    assert settled == {
        "id": "import-42", "sealed": True, "settled": True, "pending": 0, "acked": 4,
        "dead": 0, "cancelled": 0,
    }
    assert sorted(pushed) == ["on_complete", "on_success"]
    callbacks = fetched(q)
    assert [(j["id"], j["payload"], j["priority"]) for j in callbacks] == [
        (pushed["on_complete"], {"notify": "complete"}, 5),
        (pushed["on_success"], {"notify": "success"}, 0),
    ]
    assert q.get_job(pushed["on_complete"])["max_attempts"] == 2

    # Sealing again, and acking again, push nothing more.
    assert q.seal_batch("import-42")["callbacks_pushed"] == pushed
    assert q.ack([jobs[3]["lease"]])[0]["ok"] is True
    assert all(r["ok"] for r in q.ack([j["lease"] for j in callbacks]))
    assert fetched(q) == []
    stats = q.stats()
    assert (stats["pushed"], stats["acked"], stats["ready"]) == (6, 6, 0)


def test_a_batch_with_a_dead_job_pushes_on_dead_and_on_complete_not_on_success(server):
    q = Queue("batches-dead", server.url)
    q.create_batch(
        "b", on_success={"payload": "success"}, on_complete={"payload": "complete"},
        on_dead={"payload": "dead"},
    )
    ok = q.push("ok", batch="b")
    doomed = q.push("doomed", batch="b", max_attempts=1)
    sealed = q.seal_batch("b")
    assert (sealed["pending"], sealed["settled"]) == (2, False)
    leases = {j["id"]: j["lease"] for j in fetched(q)}
    q.nack([leases[doomed]], error="boom")
    # The first death pushes on_dead at once; the batch waits for the other job.
    batch = q.get_batch("b")
    assert (batch["pending"], batch["dead"], batch["settled"]) == (1, 1, False)
    assert list(batch["callbacks_pushed"]) == ["on_dead"]
    q.ack([leases[ok]])
    batch = without_times(q.get_batch("b"))
    assert batch["callbacks_pushed"].keys() == {"on_dead", "on_complete"}
    assert (batch["acked"], batch["dead"], batch["settled"]) == (1, 1, True)
    assert sorted(j["payload"] for j in fetched(q)) == ["complete", "dead"]


def test_unknown_and_sealed_batches_are_refused(server):
    q = Queue("batches-refused", server.url)

    def refused(call: Any) -> tuple[int, str]:
        with pytest.raises(AnteroomError) as err:
            call()
        return err.value.status, err.value.code

    assert refused(lambda: q.push(1, batch="nope")) == (404, "unknown_batch")
    assert refused(lambda: q.get_batch("nope")) == (404, "unknown_batch")
    assert refused(lambda: q.seal_batch("nope")) == (404, "unknown_batch")
    q.create_batch("once")
    assert refused(lambda: q.create_batch("once")) == (409, "conflict")
    q.seal_batch("once")
    assert refused(lambda: q.push(1, batch="once")) == (409, "conflict")
    # A bulk push with one job naming it stores none of them.
    assert refused(lambda: q.push_bulk([{"payload": 1}, {"payload": 2, "batch": "once"}])) == (
        409, "conflict")
    assert q.stats()["pushed"] == 0
    assert refused(lambda: q.create_batch(on_success={"payload": 1, "bogus": 2})) == (
        400, "invalid_argument")
    # Sealed with no job pending, it settled at once.
    assert (q.get_batch("once")["settled"], q.get_batch("once")["pending"]) == (True, 0)

    first, second = q.create_batch()["id"], q.create_batch()["id"]
    assert first and second and first != second
    with pytest.raises(ValueError, match="batch"):
        q.push_bulk([{"payload": 1, "batches": "x"}])


def test_fan_out_in_a_batch_then_fan_in_reading_the_results(server):
    q = Queue("fan", server.url)

    def handler(job: Job) -> Any:
        if job.payload["step"] == "part":
            return {"part": job.payload["n"], "rows": job.payload["n"] * 10}
        if job.payload["step"] == "merge":
            deps = q.get_job_dependencies(job.id)
            return {"rows": sum(d["result"]["rows"] for d in deps), "from": len(deps)}
        return None  # the batch's callback

    q.create_batch("report", on_success={"payload": {"step": "notify"}})
    parts = q.push_bulk([{"payload": {"step": "part", "n": n}, "batch": "report"}
                         for n in range(1, 5)])
    merge = q.push({"step": "merge"}, depends_on=parts)
    q.seal_batch("report")

    w = Worker(q, handler, concurrency=3, wait_ms=200, handle_signals=False)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        assert q.wait_for_result(merge, timeout=10) == {"rows": 100, "from": 4}
        notify = q.get_batch("report")["callbacks_pushed"]["on_success"]
        assert q.wait_for_result(notify, timeout=10) is None
    finally:
        w.close()
        t.join(10)
        assert not t.is_alive()
    assert q.get_job(notify)["payload"] == {"step": "notify"}
    stats = q.stats()
    assert (stats["pushed"], stats["acked"], stats["dead"]) == (6, 6, 0)


def test_the_asyncio_queue_has_the_same_calls(server):
    async def main() -> None:
        q = AsyncQueue("aio-workflow", server.url)
        batch = await q.create_batch("b", on_complete={"payload": "done"})
        assert batch["id"] == "b"
        a = await q.push("a", batch="b")
        c = await q.push("c", depends_on=[a], on_dependency_failure="ignore")
        assert (await q.seal_batch("b"))["sealed"] is True
        assert await q.get_job_dependencies(c) == [{"id": a, "state": "pending"}]
        jobs = (await asyncio.to_thread(q.sync.fetch, "w", 10))["jobs"]
        assert [j["id"] for j in jobs] == [a]
        await q.ack([jobs[0]["lease"]], [7])
        assert await q.get_job_dependencies(c) == [{"id": a, "state": "acked", "result": 7}]
        got = await q.get_batch("b")
        assert (got["settled"], got["acked"], list(got["callbacks_pushed"])) == (
            True, 1, ["on_complete"])
        await q.close()

    asyncio.run(main())
