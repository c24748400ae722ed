"""The asyncio surface: a worker of coroutine handlers, the queue's calls, a room's updates."""

import asyncio

from anteroom import AsyncQueue, AsyncRoom, AsyncWorker, Job


def test_async_worker_processes_jobs(server):
    async def main() -> None:
        q = AsyncQueue("aio", server.url)
        await q.push_bulk([{"payload": i} for i in range(30)])
        await q.push({"fail": True}, max_attempts=1)
        running = 0
        most = 0
        seen: list[int] = []

        async def handler(job: Job) -> None:
            nonlocal running, most
            if isinstance(job.payload, dict):
                raise RuntimeError("asked to fail")
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1
            seen.append(job.payload)

        w = AsyncWorker(q, handler, concurrency=4, wait_ms=200, handle_signals=False)
        task = asyncio.create_task(w.run())
        async with asyncio.timeout(10):
            while (await q.stats())["acked"] < 30 or not await q.dead():
                await asyncio.sleep(0.05)
        async with asyncio.timeout(5):
            await w.close()
            await task
        assert sorted(seen) == list(range(30))
        assert most == 4
        dead = await q.dead()
        assert "RuntimeError: asked to fail" in dead[0]["error"]
        stats = await q.stats()
        assert (stats["acked"], stats["dead"], stats["inflight"]) == (30, 1, 0)

    asyncio.run(main())


def test_async_room_updates(server):
    async def main() -> None:
        room = AsyncRoom("aroom", server.url)
        await room.configure(capacity=1)
        await room.check("ann-" + "a" * 24)
        statuses = []
        async with asyncio.timeout(5):
            async for status in room.updates("bob-" + "b" * 24):
                statuses.append(status)
                if status["status"] == "waiting":
                    await room.leave("ann-" + "a" * 24, final=True)
                if status["status"] == "active":
                    break  # leaving the loop closes the stream
        assert [s["status"] for s in statuses][-1] == "active"
        assert statuses[0]["position"] == 1

    asyncio.run(main())


def test_async_worker_hands_back_a_job_outliving_the_grace(server):
    async def main() -> None:
        q = AsyncQueue("aio-grace", server.url)
        await q.push({"slow": True})
        started = asyncio.Event()
        cancelled = False

        async def handler(job: Job) -> None:
            nonlocal cancelled
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled = True
                raise

        w = AsyncWorker(q, handler, shutdown_grace_s=0.2, lease_ms=30_000, wait_ms=200,
                        handle_signals=False)
        task = asyncio.create_task(w.run())
        async with asyncio.timeout(5):
            await started.wait()
            await w.close()
            await task
        assert cancelled
        stats = await q.stats()  # back at once, not after the 30 s lease
        assert (stats["ready"], stats["inflight"], stats["nacked"]) == (1, 0, 1)

    asyncio.run(main())
