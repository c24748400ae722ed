#!/usr/bin/env python3
"""Writes tests/upgrade/data-format-N/: a data directory as the build given wrote it, and what
that build answered about it after a restart (expected.json). upgrade_test.py starts later
builds on a copy and holds their answers to those. Run it once per released data format, with
the build that writes it (the directory is kept in git; the build is not):

    tests/upgrade/make_data_dir.py build/release/anteroom

The changes are those of the log_records fuzz seeds (fuzz/make_log_seeds.py): every kind of
record, across a snapshot and the segment after it. Loopback only; the server is stopped by its
PID.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "fuzz"))
import make_log_seeds  # noqa: E402  (its changes(): every kind of record)

ENV = dict(os.environ, ANTEROOM_TOKEN_SECRET="", ANTEROOM_ADMIN_KEY="")
ENV.pop("ANTEROOM_TOKEN_SECRET")  # the secret is the directory's own (DIR/secret)

# What upgrade_test.py reads back: things a restart does not change as time passes (presence
# deadlines and leases expire while the directory waits in git, so counts of waiting people
# and leased jobs do not belong here).
READS = [
    "/v1/rooms/lobby1", "/v1/rooms/drop1", "/v1/rooms/drop2",
    "/v1/rooms/drop1/schedule", "/v1/rooms/drop2/schedule",
    "/v1/rooms/drop1/passes", "/v1/rooms/drop2/passes",
    "/v1/queues/jobs1", "/v1/queues/jobs2", "/v1/queues/dead1", "/v1/queues/dead2",
    "/v1/queues/jobs1/dead", "/v1/queues/dead1/dead",
]


def serve(binary, data_dir, log):
    server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--data", data_dir,
                               "--fsync", "always", "--threads", "1", "--draw-chunk", "8"],
                              stdout=subprocess.PIPE, stderr=log, env=ENV, text=True)
    base = server.stdout.readline().strip().split()[-1]
    return server, base


def stop(server):
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)


def main():
    binary = os.path.abspath(sys.argv[1])
    data_dir = tempfile.mkdtemp(prefix="anteroom-upgrade-")
    log = open(data_dir + ".log", "w")
    server, base = serve(binary, data_dir, log)
    try:
        make_log_seeds.changes(base, 1)
        server.send_signal(signal.SIGUSR1)  # a snapshot; the later changes go to the next segment
        for _ in range(100):
            if any(f.endswith(".snap") for f in os.listdir(data_dir)):
                break
            time.sleep(0.05)
        make_log_seeds.changes(base, 2)
    finally:
        stop(server)
    server, base = serve(binary, data_dir, log)
    try:
        answers = {path: make_log_seeds.call(base, "GET", path) for path in READS}
    finally:
        stop(server)
    version = open(os.path.join(data_dir, "format")).read().strip()
    out = os.path.join(HERE, f"data-format-{version}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(data_dir, out, ignore=shutil.ignore_patterns("LOCK"))
    shutil.rmtree(data_dir)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(answers, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{out}: {sorted(os.listdir(out))}")


if __name__ == "__main__":
    main()
