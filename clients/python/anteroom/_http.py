"""Keep-alive HTTP/1.1 to the server: one `http.client` connection per user, JSON in and out.

urllib.request opens a connection per request; a worker making one request per job would then
pay a TCP handshake per job and leave sockets in TIME_WAIT, so connections are kept open here.
An `http.client.HTTPConnection` is not thread-safe: each thread (worker slot, fetch loop,
maintenance loop) holds its own `Connection`, and plain API objects draw one from a `Pool`.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .errors import AnteroomError

DEFAULT_URL = "http://127.0.0.1:8080"


def quote(segment: str) -> str:
    """A name as one path segment: anything the naming rule does not allow stays escaped, so a
    bad name reaches the server as itself and is refused there (400), never as another path."""
    return urllib.parse.quote(segment, safe="")


def _error_from(status: int, raw: bytes, retry_after: str | None) -> AnteroomError:
    after: float | None = None
    if retry_after is not None:
        try:
            after = float(retry_after)
        except ValueError:
            after = None
    try:
        err = json.loads(raw)["error"]
        return AnteroomError(status, str(err["code"]), str(err["message"]), after)
    except (ValueError, KeyError, TypeError):
        # Not the server's own answer (a proxy's HTML page, say): keep what can be shown.
        text = raw[:300].decode("utf-8", "replace")
        return AnteroomError(status, f"http_{status}", text, after)


class Connection:
    """One kept-alive connection. Used by one thread at a time; `interrupt()` may be called from
    any thread to end a request that is waiting (a parked long poll)."""

    def __init__(self, url: str = DEFAULT_URL, key: str | None = None, timeout: float = 30.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        self._prefix = parts.path.rstrip("/")
        self._key = key
        self.timeout = timeout
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._conn: http.client.HTTPConnection = cls(parts.hostname, parts.port, timeout=timeout)
        self._interrupted = False
        # Guards _interrupted against interrupt() from elsewhere; an RLock because a signal
        # handler may interrupt on the thread that holds it.
        self._lock = threading.RLock()
        self.requests = 0  # requests sent: the tests count a worker's cost with it

    def _headers(self, extra: Mapping[str, str] | None, with_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if with_body:
            headers["Content-Type"] = "application/json"
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        if extra:
            headers.update(extra)
        return headers

    def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        headers: dict[str, str],
        timeout: float,
    ) -> http.client.HTTPResponse:
        # Interrupted before the request went out: it does not go out at all (a long poll sent
        # after close() would park for its whole wait).
        if self._interrupted:
            raise ConnectionAbortedError("the request was interrupted")
        # A server closes kept-alive connections after its idle timeout (120 s): the first
        # request on such a connection fails before any answer. That one is sent again on a
        # new connection, once; a failure on a fresh connection is the server's.
        reused = self._conn.sock is not None
        while True:
            try:
                self._conn.timeout = timeout
                if self._conn.sock is not None:
                    self._conn.sock.settimeout(timeout)
                self.requests += 1
                self._conn.request(method, self._prefix + path, body=data, headers=headers)
                with self._lock:
                    # interrupt() came while the socket was being opened, and saw none.
                    if self._interrupted and self._conn.sock is not None:
                        self._conn.sock.shutdown(socket.SHUT_WR)
                return self._conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, http.client.BadStatusLine):
                self._conn.close()
                if not reused or self._interrupted:
                    raise
                reused = False
            except BaseException:
                self._conn.close()
                raise

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        """Sends one request and answers its JSON (or its text with `raw`); raises
        `AnteroomError` for an error answer and `OSError` when the server is unreachable."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        resp = self._send(
            method, path, data, self._headers(None, data is not None), timeout or self.timeout
        )
        try:
            content = resp.read()
        except BaseException:
            self._conn.close()
            raise
        if not 200 <= resp.status < 300:
            raise _error_from(resp.status, content, resp.getheader("Retry-After"))
        if raw:
            return content.decode("utf-8", "replace")
        return json.loads(content) if content else None

    def open_stream(
        self, path: str, headers: Mapping[str, str], timeout: float
    ) -> http.client.HTTPResponse:
        """GETs a streamed answer (SSE) and hands back the open response, for reading as it
        arrives. The connection carries nothing else until the response is closed."""
        resp = self._send("GET", path, None, self._headers(headers, False), timeout)
        if not 200 <= resp.status < 300:
            content = resp.read()
            raise _error_from(resp.status, content, resp.getheader("Retry-After"))
        return resp

    def interrupt(self, *, reading_too: bool = False) -> None:
        """Ends the request in progress, and refuses any later one, from any thread. By default the socket is shut for
        writing only: the server sees the hang-up at once (a long poll then leaves its line,
        and hands the parked request nothing: docs/api.md) and answers 503, while any answer
        it had already written, jobs included, can still be read rather than lost. A stream
        nobody will read further (`reading_too`) is shut both ways: its reader wakes at once."""
        with self._lock:
            self._interrupted = True
            sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR if reading_too else socket.SHUT_WR)
            except OSError:
                pass  # already closed: nothing is waiting

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def close(self) -> None:
        self._conn.close()


class Pool:
    """Idle connections kept for reuse, so calls from many threads each get one of their own
    without opening one per request."""

    def __init__(
        self, url: str = DEFAULT_URL, key: str | None = None, timeout: float = 30.0,
        max_idle: int = 8,
    ) -> None:
        Connection(url, key, timeout).close()  # the URL checked now, not at first use
        self.url = url
        self.key = key
        self.timeout = timeout
        self._max_idle = max_idle
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def new(self) -> Connection:
        """A connection of this pool's server and key, owned by the caller."""
        return Connection(self.url, self.key, self.timeout)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self.new()
        try:
            yield conn
        finally:
            with self._lock:
                if len(self._idle) < self._max_idle:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        with self.connection() as conn:
            return conn.request(method, path, body, timeout=timeout, raw=raw)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
