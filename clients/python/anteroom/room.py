"""`Room`: a waiting room's session routes, and its live channel over Server-Sent Events.

The live channel is also a WebSocket (`/ws`), which the standard library cannot speak; SSE is
plain HTTP, so this client uses SSE only.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

from ._backoff import Backoff, call_with_retries
from ._http import DEFAULT_URL, Connection, Pool, quote
from .errors import AnteroomError, is_transient
from .sse import SseParser

# The server sends a heartbeat at least every 15 s: a stream silent for three times that is
# dead (a network that vanished without a FIN), and is opened again.
_STREAM_READ_TIMEOUT_S = 45.0


class Room:
    """One room of a server. `admin_key` (default `$ANTEROOM_ADMIN_KEY`) is sent on every
    call: the admin routes need it, and with it the session routes take session ids shorter
    than 22 characters (an app naming sessions after its users, from its own server)."""

    def __init__(
        self,
        name: str,
        url: str = DEFAULT_URL,
        *,
        admin_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 0,
    ) -> None:
        self.name = name
        self.url = url
        self.admin_key = admin_key if admin_key is not None else os.environ.get(
            "ANTEROOM_ADMIN_KEY"
        )
        self.retries = retries
        self._path = f"/v1/rooms/{quote(name)}"
        self._pool = Pool(url, self.admin_key, timeout)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        def call() -> Any:
            return self._pool.request(method, self._path + path, body)

        return call_with_retries(call, self.retries)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Room:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions ---------------------------------------------------------------------------

    def check(self, session: str | None = None, pass_code: str | None = None) -> dict[str, Any]:
        """Joins the line (the first check) or checks in: the status object (`session`,
        `status`, `position`, `waiting`, `active`, `capacity`, `eta_ms`, `token`, ...). Without
        `session` the server names a new one (read it from the answer). `pass_code` redeems a
        pass with this check."""
        body: dict[str, Any] = {}
        if session is not None:
            body["session"] = session
        if pass_code is not None:
            body["pass"] = pass_code
        result: dict[str, Any] = self._call("POST", "/check", body)
        return result

    def touch(self, session: str) -> dict[str, Any]:
        """Activity of an admitted session (resets its idle timer)."""
        result: dict[str, Any] = self._call("POST", "/touch", {"session": session})
        return result

    def leave(self, session: str, final: bool = False) -> dict[str, Any]:
        """Leaves: a waiting session at once; an admitted one keeps its slot for `grace_ms`,
        or frees it at once with `final`."""
        body: dict[str, Any] = {"session": session}
        if final:
            body["final"] = True
        result: dict[str, Any] = self._call("POST", "/leave", body)
        return result

    def updates(self, session: str, *, reconnect: bool = True) -> Updates:
        """The session's statuses as they change, over SSE: see `Updates`."""
        return Updates(self, session, reconnect=reconnect)

    # -- the room (admin) -------------------------------------------------------------------

    def configure(self, **settings: Any) -> dict[str, Any]:
        """`PUT /v1/rooms/{room}`: creates the room (`capacity` required) or changes the
        settings given; answers the room object."""
        result: dict[str, Any] = self._call("PUT", "", settings)
        return result

    def get(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "")
        return result

    def delete(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("DELETE", "")
        return result


class Updates:
    """An iterator of a session's status objects from `GET /v1/rooms/{room}/events`.

    Opening the stream is a check-in (an unknown session joins), and while it is open the
    session counts as checking in continuously. The session goes in the `Anteroom-Session`
    header, never in the URL, which proxies log. Heartbeats are read and not yielded. A stream
    that breaks is opened again (jittered backoff, at least the stream's `retry`) unless
    `reconnect` is False; iteration ends after a `gone` status (the server closes the stream).
    `close()` ends it from any thread: the iterator then stops.
    """

    def __init__(self, room: Room, session: str, *, reconnect: bool = True) -> None:
        self._room = room
        self._session = session
        self._reconnect = reconnect
        self._closed = threading.Event()
        self._conn: Connection | None = None
        self._gen = self._generate()

    def __iter__(self) -> Updates:
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self._gen)

    def __enter__(self) -> Updates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        conn = self._conn
        if conn is not None:
            conn.interrupt(reading_too=True)

    def _generate(self) -> Iterator[dict[str, Any]]:
        room = self._room
        backoff = Backoff(0.25, 10.0)
        headers = {"Accept": "text/event-stream", "Anteroom-Session": self._session}
        path = room._path + "/events"
        while not self._closed.is_set():
            conn = self._conn = Connection(room.url, room.admin_key, _STREAM_READ_TIMEOUT_S)
            parser = SseParser()
            gone = False
            try:
                if self._closed.is_set():
                    return
                resp = conn.open_stream(path, headers, _STREAM_READ_TIMEOUT_S)
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break  # the server ended the stream
                    for event in parser.feed(chunk):
                        message = json.loads(event.data)
                        if message.get("type") == "heartbeat":
                            continue
                        backoff.reset()
                        gone = message.get("status") == "gone"
                        yield message
            except (AnteroomError, OSError, http.client.HTTPException) as exc:
                if self._closed.is_set():
                    return
                # A stream cut mid-chunk (IncompleteRead) is a broken connection too.
                broken = is_transient(exc) or isinstance(exc, http.client.HTTPException)
                if not (self._reconnect and broken):
                    raise
            finally:
                conn.close()
            if gone or not self._reconnect:
                return
            retry_s = (parser.retry_ms or 0) / 1000
            self._closed.wait(backoff.next_delay(retry_s))
