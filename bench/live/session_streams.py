#!/usr/bin/env python3
"""What N live streams on ONE session cost the server, against N streams on N sessions: the
cost must grow with the streams, not with their square (a new stream of a session must not
cost a message to each of the older ones).

  python3 bench/live/session_streams.py [--binary build/release/anteroom] [--streams 2000]

Starts `anteroom serve --memory-only` on a free loopback port, opens the streams (SSE, never
read, as a hostile client would), then closes them; prints the server's CPU time (utime +
stime from /proc) and RSS for each shape, and the ratio. Every process it starts is stopped by
its PID; every wait is bounded."""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def request(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def open_streams(port, room, sessions):
    socks = []
    for s in sessions:
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(f"GET /v1/rooms/{room}/events?session={s} HTTP/1.1\r\n"
                  f"Host: 127.0.0.1:{port}\r\n\r\n".encode())
        socks.append(c)
    return socks


def shape(pid, port, base, room, sessions):
    request(base, "PUT", f"/v1/rooms/{room}", {"capacity": 1})
    request(base, "POST", f"/v1/rooms/{room}/check", {"session": sessions[0]})
    before_cpu, before_rss = cpu_seconds(pid), rss_mb(pid)
    start = time.monotonic()
    socks = open_streams(port, room, sessions)
    time.sleep(1.0)  # let the hub attach them all
    # A well-behaved client's check in another room, while they are open.
    t = time.monotonic()
    request(base, "POST", "/v1/rooms/other/check", {})
    other_ms = (time.monotonic() - t) * 1000
    cpu = cpu_seconds(pid) - before_cpu
    peak = rss_mb(pid)
    for c in socks:
        c.close()
    time.sleep(1.0)
    return {"cpu_s": cpu, "rss_before_mb": before_rss, "rss_open_mb": peak,
            "rss_after_mb": rss_mb(pid), "other_check_ms": other_ms,
            "open_s": time.monotonic() - start}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/anteroom")
    ap.add_argument("--streams", type=int, default=2000)
    args = ap.parse_args()
    proc = subprocess.Popen([args.binary, "serve", "--memory-only", "--listen", "127.0.0.1:0",
                             "--log-level", "warn"], stdout=subprocess.PIPE,
                            env={**os.environ, "ANTEROOM_TOKEN_SECRET": "session-streams-bench"})
    try:
        port = None
        deadline = time.monotonic() + 10
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline().decode()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            sys.exit("the server did not start")
        base = f"http://127.0.0.1:{port}"
        request(base, "PUT", "/v1/rooms/other", {"capacity": 10})
        one = "same-session-Qm9vYmFyYmF6cXV4"
        same = shape(proc.pid, port, base, "same", [one] * args.streams)
        distinct = shape(proc.pid, port, base, "distinct",
                         [f"s{i:06d}-Qm9vYmFyYmF6cXV4YmF6" for i in range(args.streams)])
        for name, r in (("one session", same), ("distinct sessions", distinct)):
            print(f"{args.streams} streams, {name:17}: CPU {r['cpu_s']:.2f} s, RSS "
                  f"{r['rss_before_mb']:.0f} -> {r['rss_open_mb']:.0f} -> "
                  f"{r['rss_after_mb']:.0f} MB, another room's check {r['other_check_ms']:.1f} ms")
        print(f"CPU one session / distinct sessions: "
              f"{same['cpu_s'] / max(distinct['cpu_s'], 0.01):.2f}x")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
