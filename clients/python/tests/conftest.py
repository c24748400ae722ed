"""The real `anteroom serve` for each test (port 0, memory only, stopped by its PID), and the
tools the tests share. Every wait is bounded. The binary is $ANTEROOM_BINARY (ctest passes
the one it built), else build/release/anteroom of this checkout."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

HERE = Path(__file__).resolve().parent
CLIENT_DIR = HERE.parent
REPO = CLIENT_DIR.parent.parent
sys.path.insert(0, str(CLIENT_DIR))  # the package from the source tree

BINARY = os.environ.get("ANTEROOM_BINARY") or str(REPO / "build" / "release" / "anteroom")

T = TypeVar("T")


class Server:
    def __init__(self, args: list[str] | None = None, env: dict[str, str] | None = None):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("ANTEROOM_")}
        clean["ANTEROOM_TOKEN_SECRET"] = "python-client-test-secret"
        clean.update(env or {})
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--listen", "127.0.0.1:0", "--memory-only", "--log-level", "warn",
             *(args or [])],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=clean, text=True,
        )
        self.url = ""
        found = threading.Event()

        def read() -> None:  # stdout read in a thread, so the wait for it is bounded
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(10):
            self.stop()
            raise RuntimeError(f"{BINARY} did not listen within 10 s")

    def api(self, method: str, path: str, body: Any = None, raw: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read().decode()
        return text if raw else json.loads(text)

    def route_count(self, method: str, route: str) -> int:
        """Requests the server answered on `route`, from its latency histogram."""
        text = self.api("GET", "/metrics", raw=True)
        pattern = (
            r'^anteroom_http_request_duration_seconds_count\{method="' + method
            + r'",route="' + re.escape(route) + r'"\} (\d+)$'
        )
        m = re.search(pattern, text, re.M)
        return int(m.group(1)) if m else 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@pytest.fixture
def server() -> Iterator[Server]:
    if not os.access(BINARY, os.X_OK):
        pytest.fail(f"no anteroom binary at {BINARY} (set ANTEROOM_BINARY)")
    s = Server()
    try:
        yield s
    finally:
        s.stop()


def eventually(fn: Callable[[], T], timeout: float = 10.0, what: str = "condition") -> T:
    """Polls `fn` until it answers something true, or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last  # type: ignore[no-any-return]
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


class WorkerProcess:
    """tests/worker_proc.py as a child process: a `Worker` whose handler logs each job's start
    and end to a file, one JSON object a line."""

    def __init__(self, tmp: Path, name: str, **options: Any) -> None:
        self.log = tmp / f"{name}.log"
        self.log.touch()
        env = dict(os.environ, PYTHONPATH=str(CLIENT_DIR))
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "worker_proc.py"), str(self.log), json.dumps(options)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]

    def started(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["event"] == "start"]

    def ended(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["event"] == "end"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


@pytest.fixture
def worker_procs(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    procs: list[WorkerProcess] = []

    def start(name: str, **options: Any) -> WorkerProcess:
        p = WorkerProcess(tmp_path, name, **options)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
