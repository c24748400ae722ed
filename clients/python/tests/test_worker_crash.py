"""A worker process killed with SIGKILL mid-job loses nothing: its jobs go to another worker
once its heartbeat lapses, and each is acked once."""

import threading

from anteroom import Job, Queue, Worker
from conftest import eventually


def test_sigkill_mid_job_loses_nothing(server, worker_procs):
    q = Queue("crash", server.url)
    # Long on the first attempt (the killed worker is in the middle of them), short after.
    ids = q.push_bulk([{"payload": {"ms": 20_000, "first_only": True}} for _ in range(4)])
    a = worker_procs("a", url=server.url, queue="crash", concurrency=2, lease_ms=30_000,
                     heartbeat_ms=600, handle_signals=False)
    eventually(lambda: len(a.started()) == 2, what="worker a to start two jobs")
    a.kill()

    done: list[Job] = []
    lock = threading.Lock()

    def handler(job: Job) -> None:
        with lock:
            done.append(job)

    b = Worker(q, handler, concurrency=2, lease_ms=30_000, wait_ms=500, handle_signals=False)
    t = threading.Thread(target=b.run)
    t.start()
    try:
        # The leases are 30 s: only the lapsed heartbeat (0.6 s) can bring the jobs back soon.
        stats = eventually(lambda: (s := q.stats())["acked"] == 4 and s, timeout=8,
                           what="every job acked")
    finally:
        b.close()
        t.join(10)
    assert not t.is_alive()
    assert sorted(j.id for j in done) == sorted(ids)  # each job handled once by b
    assert sorted(j.attempt for j in done) == [1, 1, 2, 2]  # a's two came back as attempt 2
    assert a.ended() == []
    assert stats["pushed"] == stats["acked"] == 4
    assert (stats["ready"], stats["inflight"], stats["dead"]) == (0, 0, 0)
