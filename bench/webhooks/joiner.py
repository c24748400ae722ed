#!/usr/bin/env python3
"""Paced joins for scripts/bench-webhooks.sh: RATE new sessions a second into ROOM (a room of
large capacity, so each join is an admission), for SECONDS, over one keep-alive connection per
THREADS thread. Prints one JSON line: joins made, errors, the rate reached.

    joiner.py URL ROOM RATE SECONDS [THREADS]
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse

url, room, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
threads = int(sys.argv[5]) if len(sys.argv) > 5 else 4
parsed = urllib.parse.urlparse(url)
made, errors = [0] * threads, [0] * threads


def run(k):
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    per = rate / threads
    start = time.monotonic()
    n = 0
    while True:
        due = start + n / per
        now = time.monotonic()
        if due - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        body = json.dumps({"session": f"flow-{k}-{n}-0000000000000000"})
        try:
            conn.request("POST", f"/v1/rooms/{room}/check", body,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                made[k] += 1
            else:
                errors[k] += 1
        except OSError:
            errors[k] += 1
            conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
        n += 1


began = time.monotonic()
workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
elapsed = time.monotonic() - began
print(json.dumps({"joins": sum(made), "errors": sum(errors),
                  "joins_per_s": round(sum(made) / elapsed, 1)}))
