#!/usr/bin/env python3
"""What one GET /v1/stats/history costs with many queues (the dashboard asks every 5 s): the
answer's bytes and time, the server's peak RSS growth, and a /healthz answered meanwhile; and
the same for walking every page. Run it with two binaries to compare them.

  python3 bench/http/stats_history.py [--binary build/release/anteroom] [--queues 1000]
                                      [--samples 181]

Starts `anteroom serve --memory-only --stats-interval-ms 100` on a free loopback port, pushes
one job to each queue, waits until each has --samples samples (181 = the default 15 minutes at
5 s), then asks. Every process it starts is stopped by its PID; every wait is bounded."""
import argparse
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def get(base, path):
    start = time.monotonic()
    with urllib.request.urlopen(base + path, timeout=60) as r:
        body = r.read()
    return body, time.monotonic() - start


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()


def timed_get_with_probe(base, path):
    """The GET, and the slowest /healthz asked every 5 ms while it runs."""
    probe_worst = [0.0]
    done = threading.Event()

    def probe():
        while not done.is_set():
            _, took = get(base, "/healthz")
            probe_worst[0] = max(probe_worst[0], took)
            time.sleep(0.005)

    t = threading.Thread(target=probe)
    t.start()
    body, took = get(base, path)
    done.set()
    t.join(timeout=30)
    return body, took, probe_worst[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/anteroom")
    ap.add_argument("--queues", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=181)
    args = ap.parse_args()

    proc = subprocess.Popen([args.binary, "serve", "--memory-only", "--listen", "127.0.0.1:0",
                             "--stats-interval-ms", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        deadline = time.monotonic() + 10
        while port is None and time.monotonic() < deadline:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", proc.stdout.readline())
            if m:
                port = int(m.group(1))
        if port is None:
            sys.exit("the server did not start")
        base = f"http://127.0.0.1:{port}"
        for i in range(args.queues):
            post(base, f"/v1/queues/q{i:05}/jobs", {"payload": {"n": i}})
        # Each sample of every queue is one interval (100 ms) apart.
        deadline = time.monotonic() + args.samples * 0.1 * 3 + 30
        while time.monotonic() < deadline:
            body, _ = get(base, "/v1/stats/history?kinds=queues&limit=1")
            doc = json.loads(body)
            rows = doc.get("queues", [])
            if rows and len(rows[0]["samples"]) >= args.samples:
                break
            if not rows:  # a server without paging answers everything: ask it less often
                time.sleep(1)
            time.sleep(0.5)
        rss_before = status_kb(proc.pid, "VmRSS")
        body, took, probe = timed_get_with_probe(base, "/v1/stats/history")
        hwm = status_kb(proc.pid, "VmHWM")
        doc = json.loads(body)
        print(f"{args.binary}: {args.queues} queues x {args.samples} samples")
        print(f"  one GET /v1/stats/history: {len(body) / 1e6:.2f} MB in {took * 1000:.0f} ms, "
              f"{len(doc['queues'])} queue rows; slowest /healthz meanwhile "
              f"{probe * 1000:.0f} ms; RSS {rss_before / 1024:.0f} MB, peak {hwm / 1024:.0f} MB")
        if "next" in doc:
            total_bytes, total_time, pages, after = 0, 0.0, 0, ""
            while pages < 10_000:
                path = "/v1/stats/history?kinds=queues&limit=100"
                if after:
                    path += "&queue_after=" + after
                body, took = get(base, path)
                total_bytes += len(body)
                total_time += took
                pages += 1
                nxt = json.loads(body)["next"]["queue_after"]
                if nxt is None:
                    break
                after = nxt
            print(f"  every queue, 100 a page: {pages} GETs, {total_bytes / 1e6:.2f} MB in "
                  f"{total_time * 1000:.0f} ms ({total_time * 1000 / pages:.1f} ms each)")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
