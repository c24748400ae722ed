#!/usr/bin/env python3
"""A data directory written by an older release is read by this build: for each
tests/upgrade/data-format-N/ (written by make_data_dir.py with the build of format N), start
`anteroom serve` on a copy, hold its answers to what that build answered (expected.json), check
the directory is now marked with this build's format, then restart on it and check again (now
in this build's layouts, the old segments still in place).

    tests/upgrade/upgrade_test.py build/release/anteroom

Only what time cannot change is compared: the directory waited in git, so presence deadlines,
leases and events' phases have moved on since it was written. Loopback only; every server is
stopped by its PID.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

ROOM_SETTINGS = ["room", "capacity", "grace_ms", "checkin_timeout_ms", "idle_timeout_ms",
                 "admit_per_minute", "paused", "target_url", "gate", "challenge",
                 "joins_per_minute_per_client", "places_per_client", "queueing_method"]
EVENT_FIELDS = ["id", "name", "prequeue_at_ms", "starts_at_ms", "ends_at_ms", "shuffle",
                "shuffle_at_start", "prequeue_scope", "suspended", "overrides"]
QUEUE_COUNTERS = ["queue", "pushed", "acked", "cancelled", "nacked", "paused"]


def get(base, path):
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def stable(path, answer):
    """The part of an answer that the passing of time leaves alone."""
    if "/schedule" in path:
        return [{k: e.get(k) for k in EVENT_FIELDS} for e in answer["events"]]
    if "/passes" in path:
        return answer
    if path.endswith("/dead"):
        return sorted(j["id"] for j in answer["jobs"])
    if path.startswith("/v1/queues/"):
        out = {k: answer[k] for k in QUEUE_COUNTERS}
        # A lease that ran out puts its job back: the total of held jobs does not change.
        out["held"] = sum(answer[k] for k in ("ready", "delayed", "inflight", "dead"))
        return out
    return {k: answer[k] for k in ROOM_SETTINGS}


def serve(binary, data_dir, log):
    env = {k: v for k, v in os.environ.items() if k not in ("ANTEROOM_TOKEN_SECRET",)}
    env["ANTEROOM_ADMIN_KEY"] = ""
    server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data", data_dir,
                               "--threads", "1"],
                              stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    line = server.stdout.readline()
    if not line:
        server.wait(timeout=30)
        raise AssertionError(f"the server did not start on {data_dir} (log: {log.name})")
    return server, line.strip().split()[-1]


def stop(server):
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0, "the server did not stop cleanly"


def check(binary, fixture, current):
    expected = json.load(open(os.path.join(fixture, "expected.json")))
    work = tempfile.mkdtemp(prefix="anteroom-upgrade-")
    data_dir = os.path.join(work, "data")
    shutil.copytree(fixture, data_dir, ignore=shutil.ignore_patterns("expected.json"))
    os.chmod(os.path.join(data_dir, "secret"), 0o600)
    log = open(os.path.join(work, "serve.log"), "w")
    failures = []
    try:
        for start in ("first start (old layouts)", "second start (marked, new layouts)"):
            server, base = serve(binary, data_dir, log)
            try:
                for path, answer in expected.items():
                    status, got = get(base, path)
                    if status != 200:
                        failures.append(f"{start}: GET {path}: {status} {got}")
                    elif stable(path, got) != stable(path, answer):
                        failures.append(f"{start}: GET {path}:\n  was  {stable(path, answer)}\n"
                                        f"  now  {stable(path, got)}")
                if start.startswith("first"):
                    # A change in this build's layouts, so the second start replays one.
                    req = urllib.request.Request(
                        base + "/v1/rooms/lobby1", method="PUT",
                        data=json.dumps({"page": {"title": "Upgraded"}}).encode(),
                        headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=10) as r:
                        assert r.status == 200, r.status
                else:
                    status, room = get(base, "/v1/rooms/lobby1")
                    if (room.get("page") or {}).get("title") != "Upgraded":
                        failures.append(f"{start}: the page set after the upgrade: {room}")
            finally:
                stop(server)
            mark = open(os.path.join(data_dir, "format")).read().strip()
            if mark != str(current):
                failures.append(f"{start}: the directory is marked {mark}, not {current}")
    finally:
        log.close()
        if failures:
            print(open(log.name).read()[-4000:])
        shutil.rmtree(work)
    return failures


def main():
    binary = os.path.abspath(sys.argv[1])
    header = open(os.path.join(HERE, "..", "..", "src", "store", "log", "record_format.h")).read()
    current = int(re.search(r"kFormatVersion = (\d+);", header).group(1))
    fixtures = sorted(d for d in os.listdir(HERE) if d.startswith("data-format-"))
    assert fixtures, "no data directory to upgrade from"
    failures = []
    for name in fixtures:
        version = int(name.rsplit("-", 1)[1])
        if version >= current:
            continue
        got = check(binary, os.path.join(HERE, name), current)
        print(f"{name}: {'ok' if not got else f'{len(got)} differences'}")
        failures += got
    for f in failures:
        print(f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
