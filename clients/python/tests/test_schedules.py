"""Schedules of repeatable jobs against the real server: an interval schedule's runs pushed to
its queue, what GET tells of them, pause, resume and delete, cron fire times across a spring
forward, and the refusals (400, 404, 409)."""

import asyncio
import datetime
import time
from typing import Any

import pytest

from anteroom import AnteroomError, AsyncScheduler, Queue, Scheduler
from conftest import eventually

MS = datetime.timedelta(milliseconds=1)


def ms_of(text: str) -> int:
    """RFC 3339 as the server writes it ("...Z", milliseconds) in ms since the epoch."""
    at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (at - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)) // MS


def fetch_all(q: Queue, into: list[dict[str, Any]]) -> int:
    into.extend(q.fetch("w", 10)["jobs"])
    return len(into)


def test_an_interval_schedule_pushes_a_job_per_run(server):
    s = Scheduler(server.url)
    q = Queue("ticks", server.url)
    put = s.put_schedule("tick", "ticks", every_ms=1000, payload={"report": "daily"},
                         priority=3, group="acme", max_attempts=2)
    assert (put["id"], put["queue"], put["every_ms"], put["paused"], put["runs"]) == (
        "tick", "ticks", 1000, False, 0)
    assert put["job"] == {"payload": {"report": "daily"}, "priority": 3, "group": "acme",
                          "max_attempts": 2}
    assert "cron" not in put and put["overlap"] == "allow" and put["misfire"] == "skip"

    jobs: list[dict[str, Any]] = []
    eventually(lambda: fetch_all(q, jobs) >= 2, timeout=5, what="two runs' jobs")
    assert all(j["payload"] == {"report": "daily"} and j["priority"] == 3
               and j["group"] == "acme" for j in jobs)

    got = s.schedule("tick")
    assert got["runs"] >= len(jobs)
    # A run may have come due since the fetch: the latest job is then one not fetched yet.
    assert got["last_job_id"] in {j["id"] for j in jobs} or got["runs"] > len(jobs)
    times = [ms_of(t) for t in got["next_fire_times"]]
    assert len(times) == 5
    assert [b - a for a, b in zip(times, times[1:])] == [1000] * 4
    assert times[0] == got["next_run_at_ms"] > got["last_run_at_ms"]
    assert [x["id"] for x in s.schedules()] == ["tick"]


def test_pause_resume_and_delete(server):
    s = Scheduler(server.url)
    q = Queue("paused-ticks", server.url)
    s.put_schedule("tick", "paused-ticks", every_ms=1000, payload=None)
    eventually(lambda: s.schedule("tick")["runs"] >= 1, timeout=5, what="a first run")

    paused = s.pause_schedule("tick")
    assert paused["paused"] is True
    pushed = q.stats()["pushed"]
    time.sleep(1.5)  # a run or more falls due meanwhile, and is not pushed
    assert q.stats()["pushed"] == pushed
    assert s.schedule("tick")["runs"] == paused["runs"]

    resumed = s.resume_schedule("tick")
    assert resumed["paused"] is False
    # Going on from now: the times passed while paused are not caught up.
    assert resumed["next_run_at_ms"] >= resumed["updated_at_ms"]
    eventually(lambda: q.stats()["pushed"] > pushed, timeout=5, what="a run after resume")

    gone = s.delete_schedule("tick")
    assert (gone["id"], gone["deleted"]) == ("tick", True)
    assert s.schedules() == []
    for call in (s.schedule, s.delete_schedule, s.pause_schedule, s.resume_schedule):
        with pytest.raises(AnteroomError) as err:
            call("tick")
        assert (err.value.status, err.value.code) == (404, "unknown_schedule")
    assert q.stats()["ready"] >= 2, "the jobs it pushed stay"


def test_cron_fire_times_in_a_time_zone(server):
    s = Scheduler(server.url)
    # Europe/Berlin springs forward on 2030-03-31 at 02:00: that day's 02:30 does not exist
    # and runs at the first instant after the gap, 03:00 CEST (01:00 UTC).
    start = datetime.datetime(2030, 3, 29, tzinfo=datetime.UTC)
    put = s.put_schedule("berlin", "reports", cron="30 2 * * *", tz="Europe/Berlin",
                         start_at=start, end_at=ms_of("2030-04-03T00:00:00.000Z"),
                         payload=1)
    assert (put["cron"], put["tz"], put["start_at"]) == (
        "30 2 * * *", "Europe/Berlin", "2030-03-29T00:00:00.000Z")
    assert put["next_fire_times"] == [
        "2030-03-29T01:30:00.000Z",
        "2030-03-30T01:30:00.000Z",
        "2030-03-31T01:00:00.000Z",
        "2030-04-01T00:30:00.000Z",
        "2030-04-02T00:30:00.000Z",
    ]
    # A change keeps the schedule's place; max_runs shortens what is left to come.
    changed = s.put_schedule("berlin", "reports", cron="30 2 * * *", tz="Europe/Berlin",
                             start_at="2030-03-29T00:00:00Z", max_runs=2, payload=2)
    assert changed["max_runs"] == 2 and changed["job"]["payload"] == 2
    assert changed["next_fire_times"] == put["next_fire_times"][:2]
    assert changed["created_at_ms"] == put["created_at_ms"]
    with pytest.raises(ValueError):
        s.put_schedule("naive", "reports", cron="@daily", start_at=datetime.datetime(2030, 1, 1),
                       payload=1)


def test_bad_schedules_are_refused(server):
    s = Scheduler(server.url)
    for bad in (
        {"cron": "61 * * * *"},
        {"cron": "* * * * *", "tz": "Mars/Olympus_Mons"},
        {"cron": "@hourly", "every_ms": 1000},
        {},
        {"every_ms": 999},
        {"every_ms": 1000, "misfire": "sometimes"},
    ):
        with pytest.raises(AnteroomError) as err:
            s.put_schedule("bad", "q", payload=1, **bad)
        assert (err.value.status, err.value.code) == (400, "invalid_argument"), bad
    assert s.schedules() == []

    s.put_schedule("nightly", "q", cron="0 3 * * *", payload=1)
    with pytest.raises(AnteroomError) as err:
        s.put_schedule("nightly", "other-queue", cron="0 3 * * *", payload=1)
    assert (err.value.status, err.value.code) == (409, "conflict")
    assert s.schedule("nightly")["queue"] == "q"


def test_the_asyncio_scheduler(server):
    async def main() -> None:
        s = AsyncScheduler(server.url)
        try:
            put = await s.put_schedule("a", "q", cron="@daily", tz="UTC", payload={"x": 1})
            assert put["next_fire_times"][0].endswith("T00:00:00.000Z")
            assert (await s.pause_schedule("a"))["paused"] is True
            assert (await s.resume_schedule("a"))["paused"] is False
            assert [x["id"] for x in await s.schedules()] == ["a"]
            assert (await s.schedule("a"))["job"]["payload"] == {"x": 1}
            assert (await s.delete_schedule("a"))["deleted"] is True
            with pytest.raises(AnteroomError) as err:
                await s.schedule("a")
            assert err.value.code == "unknown_schedule"
        finally:
            await s.close()

    asyncio.run(main())
