"""The Python client's Worker on the worker-loop workload: one producer pushes N jobs in
batches (push_bulk) while one Worker with a no-op handler and concurrency C takes them, its acks
riding on its fetches. Prints one JSON line with `rate` (jobs acked per second, from the first
push to the last ack confirmed by close()). scripts/bench-clients.sh runs it beside the C load
generator and BullMQ.

    python3 bench/clients/python_worker.py --url http://127.0.0.1:PORT [--n 50000]
            [--concurrency 50] [--push-batch 100] [--queue NAME]
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from anteroom import Queue, Worker  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--push-batch", type=int, default=100)
    p.add_argument("--queue", default=f"python-bench-{os.getpid()}")
    p.add_argument("--limit-s", type=float, default=120.0)
    a = p.parse_args()

    queue = Queue(a.queue, url=a.url)
    lock = threading.Lock()
    all_done = threading.Event()
    completed = 0

    def handler(job: object) -> None:
        nonlocal completed
        with lock:
            completed += 1
            if completed == a.n:
                all_done.set()

    start = time.perf_counter()
    worker = Worker(queue, handler, concurrency=a.concurrency, wait_ms=1000,
                    handle_signals=False)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    for pushed in range(0, a.n, a.push_batch):
        size = min(a.push_batch, a.n - pushed)
        queue.push_bulk([{"payload": {"i": pushed + i}} for i in range(size)])
    if not all_done.wait(a.limit_s):
        print(json.dumps({"ok": False, "client": "python", "why": "time limit",
                          "completed": completed}))
        return 1
    worker.close()  # the last acks go out before it returns
    runner.join(30)
    seconds = time.perf_counter() - start
    acked = queue.stats()["acked"]
    queue.close()
    print(json.dumps({"ok": acked == a.n, "client": "python", "n": a.n,
                      "concurrency": a.concurrency, "push_batch": a.push_batch,
                      "seconds": round(seconds, 3), "rate": round(a.n / seconds),
                      "acked": acked}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
