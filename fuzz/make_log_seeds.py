#!/usr/bin/env python3
"""Writes the seeds of the log_records fuzz target (fuzz/corpus/log_records) from a real data
directory: runs `anteroom serve` on a fresh one, makes every kind of change over HTTP (rooms
with limits and a gate, check-ins, leaves, a drop-out, queueing methods, passes, a scheduled
event with its pre-queue drawn in chunks, a queue's whole life; all but the live channel's
check-ins), snapshots it with SIGUSR1, makes more changes, stops it, and cuts the seeds
from its files in the target's input modes (fuzz/log_records.cc): 0 a segment as on disk, 1 a
snapshot file, 2 and 3 unframed state and records. Run it when the data format changes:

    fuzz/make_log_seeds.py [build/release/anteroom]

Loopback only; the server is stopped by its PID. The regress-* seeds are kept.
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus", "log_records")


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return json.loads(e.read() or b"{}")


def changes(base, phase):
    room = f"lobby{phase}"
    call(base, "PUT", f"/v1/rooms/{room}", {"capacity": 2, "grace_ms": 2000,
                                             "checkin_timeout_ms": 5000, "admit_per_minute": 600,
                                             "places_per_client": 3, "target_url": "/shop",
                                             "gate": {"cookie": "anteroom_pass"}})
    for s in ("a", "b", "c", "d"):
        call(base, "POST", f"/v1/rooms/{room}/check", {"session": s})
    call(base, "POST", f"/v1/rooms/{room}/leave", {"session": "a"})
    call(base, "POST", f"/v1/rooms/{room}/touch", {"session": "a"})  # back from grace
    call(base, "DELETE", f"/v1/rooms/{room}/sessions/c")
    call(base, "POST", f"/v1/rooms/{room}/leave", {"session": "b", "final": True})
    call(base, "PUT", f"/v1/rooms/{room}", {"paused": True})
    q = f"jobs{phase}"
    call(base, "POST", f"/v1/queues/{q}/jobs",
         {"jobs": [{"payload": {"n": i}, "priority": i % 3, "dedupe_key": f"k{i}"}
                   for i in range(6)] + [{"payload": "later", "delay_ms": 60000}]})
    got = call(base, "POST", f"/v1/queues/{q}/fetch",
               {"worker": "w1", "max": 4, "lease_ms": 30000})
    leases = [j["lease"] for j in got.get("jobs", [])]
    if len(leases) >= 4:
        call(base, "POST", f"/v1/queues/{q}/ack", {"leases": leases[:1]})
        call(base, "POST", f"/v1/queues/{q}/nack",
             {"leases": leases[1:2], "delay_ms": 1000, "error": "boom"})
        call(base, "POST", f"/v1/queues/{q}/extend", {"leases": leases[2:3], "lease_ms": 60000})
    call(base, "POST", f"/v1/queues/{q}/workers/w1/heartbeat", {"ttl_ms": 30000})
    call(base, "POST", f"/v1/queues/{q}/workers/w1/release", {})
    call(base, "POST", f"/v1/queues/{q}/pause", {})
    call(base, "POST", f"/v1/queues/{q}/resume", {})
    call(base, "PUT", f"/v1/queues/{q}/key", {"key": "k" * 32})
    call(base, "DELETE", f"/v1/queues/{q}/key")
    pushed = call(base, "POST", f"/v1/queues/{q}/jobs", {"jobs": [{"payload": "drop me"}]})
    for job_id in pushed.get("ids", []):
        call(base, "DELETE", f"/v1/queues/{q}/jobs/{job_id}")
    dead = f"dead{phase}"
    call(base, "POST", f"/v1/queues/{dead}/jobs", {"jobs": [{"payload": 1, "max_attempts": 1}]})
    got = call(base, "POST", f"/v1/queues/{dead}/fetch", {"worker": "w2", "max": 1})
    call(base, "POST", f"/v1/queues/{dead}/nack",
         {"leases": [j["lease"] for j in got.get("jobs", [])], "error": "fatal"})
    call(base, "POST", f"/v1/queues/{dead}/dead/requeue", {})
    # Job state: a queue keeping few finished jobs; a result at ack (and at a fetch's ack),
    # progress and log lines of a job in flight, one of them finished with them.
    kept = f"kept{phase}"
    call(base, "PUT", f"/v1/queues/{kept}/settings", {"keep_acked": {"count": 3, "age_ms": 600000}})
    call(base, "POST", f"/v1/queues/{kept}/jobs", {"jobs": [{"payload": i} for i in range(4)]})
    got = call(base, "POST", f"/v1/queues/{kept}/fetch", {"worker": "w4", "max": 3})
    leases = [j["lease"] for j in got.get("jobs", [])]
    if len(leases) == 3:
        call(base, "POST", f"/v1/queues/{kept}/progress", {"lease": leases[0], "progress": {"p": 1}})
        call(base, "POST", f"/v1/queues/{kept}/log", {"lease": leases[0], "lines": ["a", "é"]})
        call(base, "POST", f"/v1/queues/{kept}/progress", {"lease": leases[1], "progress": 0.5})
        call(base, "POST", f"/v1/queues/{kept}/ack",
             {"leases": leases[:1], "results": [{"rows": phase}]})
        call(base, "POST", f"/v1/queues/{kept}/fetch",
             {"worker": "w4", "ack": leases[2:3], "ack_results": ["r"]})
    # Dependencies and a batch: a job waiting on two (one acked, one pending at the snapshot),
    # one failed by a dead dependency, a batch sealed with a job pending.
    flow = f"flow{phase}"
    first = call(base, "POST", f"/v1/queues/{flow}/jobs", {"payload": "a"}).get("id")
    second = call(base, "POST", f"/v1/queues/{flow}/jobs", {"payload": "b", "max_attempts": 1}).get("id")
    if first and second:
        call(base, "POST", f"/v1/queues/{flow}/jobs",
             {"payload": "c", "depends_on": [first, second], "on_dependency_failure": "ignore"})
        call(base, "POST", f"/v1/queues/{flow}/jobs", {"payload": "d", "depends_on": [second]})
    call(base, "POST", f"/v1/queues/{flow}/batches",
         {"id": "b", "on_success": {"payload": "ok"}, "on_complete": {"payload": "done"},
          "on_dead": {"payload": "lost", "priority": 1}})
    call(base, "POST", f"/v1/queues/{flow}/jobs", {"jobs": [{"payload": i, "batch": "b"} for i in range(2)]})
    call(base, "POST", f"/v1/queues/{flow}/batches/b/seal")
    got = call(base, "POST", f"/v1/queues/{flow}/fetch", {"worker": "w5", "max": 2})
    leases = [j["lease"] for j in got.get("jobs", [])]
    if len(leases) == 2:
        call(base, "POST", f"/v1/queues/{flow}/ack", {"leases": leases[:1], "results": [1]})
        call(base, "POST", f"/v1/queues/{flow}/nack", {"leases": leases[1:], "error": "x"})
    # Groups, limits and a snooze: a round-robin queue whose groups are held by rate and
    # concurrency, one group held by a snooze at the snapshot.
    tenants = f"tenants{phase}"
    call(base, "PUT", f"/v1/queues/{tenants}/settings",
         {"fairness": "round_robin",
          "limits": [{"key": "group", "rate": {"limit": 2, "period_ms": 60000}, "concurrency": 1},
                     {"key": None, "concurrency": 5}]})
    call(base, "POST", f"/v1/queues/{tenants}/jobs",
         {"jobs": [{"payload": i, "group": f"t{i % 3}"} for i in range(7)] + [{"payload": "u"}]})
    got = call(base, "POST", f"/v1/queues/{tenants}/fetch", {"worker": "w3", "max": 5})
    leases = [j["lease"] for j in got.get("jobs", [])]
    if leases:
        call(base, "POST", f"/v1/queues/{tenants}/nack",
             {"leases": leases[:1], "rate_limited": True, "retry_after_ms": 600000})
        call(base, "POST", f"/v1/queues/{tenants}/ack", {"leases": leases[1:2]})
    # Schedules: one firing every second (interval) and one cron in a zone, paused, changed,
    # one deleted; the snapshot holds them, the records put, fire and delete them.
    ticks = f"ticks{phase}"
    call(base, "PUT", f"/v1/schedules/every{phase}",
         {"queue": ticks, "every_ms": 1000, "misfire": "run_all", "max_catchup": 5,
          "jitter_ms": 10, "job": {"payload": {"n": phase}, "group": "g", "priority": 2}})
    call(base, "PUT", f"/v1/schedules/cron{phase}",
         {"queue": ticks, "cron": "*/2 * * * * *", "tz": "Europe/Berlin", "overlap": "skip",
          "max_runs": 50, "job": {"payload": "c"}})
    time.sleep(1.2)
    call(base, "POST", f"/v1/schedules/cron{phase}/pause")
    call(base, "PUT", f"/v1/schedules/gone{phase}",
         {"queue": ticks, "every_ms": 60000, "job": {"payload": 0}})
    call(base, "DELETE", f"/v1/schedules/gone{phase}")
    # Launch day: methods (the brake with include_active), passes, and an event whose
    # pre-queue is drawn (a seed and its published chunks), one left mid-draw at the snapshot.
    drop = f"drop{phase}"
    call(base, "PUT", f"/v1/rooms/{drop}", {"capacity": 1, "checkin_timeout_ms": 60000})
    call(base, "POST", f"/v1/rooms/{drop}/check", {"session": "h"})
    call(base, "PUT", f"/v1/rooms/{drop}", {"queueing_method": "random"})
    call(base, "PUT", f"/v1/rooms/{drop}",
         {"queueing_method": "queue_all", "include_active": True})
    call(base, "PUT", f"/v1/rooms/{drop}", {"queueing_method": "fifo"})
    minted = call(base, "POST", f"/v1/rooms/{drop}/passes",
                  {"count": 2, "uses": 2, "kind": "front"})
    codes = [p["code"] for p in minted.get("passes", [])]
    if codes:
        call(base, "POST", f"/v1/rooms/{drop}/check", {"session": "vip", "pass": codes[0]})
        call(base, "DELETE", f"/v1/rooms/{drop}/passes/{minted['passes'][1]['id']}")
    now = int(time.time() * 1000)
    call(base, "PUT", f"/v1/rooms/{drop}/schedule/e",
         {"name": "drop", "prequeue_at": now - 1000, "starts_at": now + 600,
          "ends_at": now + 3_600_000, "shuffle_at_start": True,
          "overrides": {"capacity": 2, "queueing_method": "fifo", "page": {"title": "t"}}})
    for i in range(40):
        call(base, "POST", f"/v1/rooms/{drop}/check", {"session": f"p{i}"})
    call(base, "PUT", f"/v1/rooms/{drop}/schedule/later",
         {"starts_at": now + 7_200_000, "ends_at": now + 7_300_000})
    call(base, "DELETE", f"/v1/rooms/{drop}/schedule/later")
    time.sleep(1.0)
    call(base, "POST", f"/v1/rooms/{drop}/check", {"session": "p1"})
    # A waiting session that stops checking in drops out: a presence expiry.
    brief = f"brief{phase}"
    call(base, "PUT", f"/v1/rooms/{brief}", {"capacity": 1, "checkin_timeout_ms": 1000})
    call(base, "POST", f"/v1/rooms/{brief}/check", {"session": "x"})
    call(base, "POST", f"/v1/rooms/{brief}/check", {"session": "y"})
    time.sleep(1.5)
    call(base, "POST", f"/v1/rooms/{brief}/check", {"session": "x"})
    if phase == 2:
        call(base, "DELETE", f"/v1/rooms/{brief}")


def frames(data):
    """The payloads of a framed file (after its 32-byte header)."""
    out, pos = [], 32
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 12:pos + 12 + n])
        pos += 12 + n
    return out


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                             os.path.join(ROOT, "build", "release", "anteroom"))
    data_dir = tempfile.mkdtemp(prefix="anteroom-seeds-")
    log = open(os.path.join(data_dir, "..", os.path.basename(data_dir) + ".log"), "w")
    env = dict(os.environ, ANTEROOM_TOKEN_SECRET="seeds", ANTEROOM_ADMIN_KEY="")
    server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data", data_dir,
                               "--fsync", "always", "--threads", "1", "--draw-chunk", "8"],
                              stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    try:
        line = server.stdout.readline()
        base = line.strip().split()[-1]
        changes(base, 1)
        server.send_signal(signal.SIGUSR1)  # a snapshot now; later changes go to the next segment
        for _ in range(100):
            if any(f.endswith(".snap") for f in os.listdir(data_dir)):
                break
            time.sleep(0.05)
        changes(base, 2)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    files = sorted(os.listdir(data_dir))
    segments = [f for f in files if f.endswith(".log")]
    snaps = [f for f in files if f.endswith(".snap")]
    assert segments and snaps, files
    seg = open(os.path.join(data_dir, segments[-1]), "rb").read()
    first = open(os.path.join(data_dir, segments[0]), "rb").read()
    snap = open(os.path.join(data_dir, snaps[-1]), "rb").read()
    shutil.rmtree(data_dir)

    for name in os.listdir(OUT):
        if not name.startswith("regress"):
            os.remove(os.path.join(OUT, name))

    def write(name, data):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)

    records = frames(first) + frames(seg)
    state = b"".join(frames(snap)[:-1])  # the end record closes it
    write("log_real", b"\0" + first)
    write("log_after_snapshot", b"\0" + seg)
    write("log_header_only", b"\0" + first[:32])
    write("log_torn_tail", b"\0" + first[:-5])
    middle = bytearray(first)
    middle[len(middle) // 2] ^= 1
    write("log_damaged_middle", b"\0" + bytes(middle))
    write("log_wrong_kind", b"\0" + snap)
    write("log_huge_length", b"\0" + first[:32] + b"\xff\xff\xff\xff" + b"\0" * 8)
    write("snapshot_real", b"\1" + snap)
    write("snapshot_no_end", b"\1" + snap[:len(snap) - 40])
    write("snapshot_cut", b"\1" + snap[:len(snap) // 2])
    unframed = lambda st, recs: (b"\2" + struct.pack("<I", len(st)) + st +
                                 b"".join(struct.pack("<H", len(r)) + r for r in recs))
    seen = set()
    for i, r in enumerate(records):
        if r[0] in seen:
            continue
        seen.add(r[0])
        write(f"record_{i:02d}_kind{r[0]}", unframed(b"", [r]))
    write("unframed_records", unframed(b"", records[:256]))
    write("unframed_state", unframed(state, []))
    write("unframed_state_and_records", unframed(state, frames(seg)[:256]))
    write("unframed_state_via_snapshot", b"\3" + unframed(state, frames(seg)[:256])[1:])
    print(f"{len(os.listdir(OUT))} seeds in {OUT}: record kinds {sorted(seen)}; "
          f"state {len(state)} bytes")


if __name__ == "__main__":
    main()
