"""A text/event-stream parser (the WHATWG HTML standard's "event stream interpretation"), fed
bytes as they arrive, so it works on any transport chunking."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Event:
    """One dispatched event: `event` is "message" when the stream named none."""

    data: str
    event: str = "message"
    id: str | None = None
    retry_ms: int | None = None


class SseParser:
    """Feed it bytes with `feed()`; it yields each event as its blank line arrives.

    Lines end in CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the
    next are one line end); `data` lines of one event are joined with "\\n"; a line starting
    with ":" is a comment (servers send them to keep a connection alive); one space after the
    colon is dropped; an event with no data is not dispatched; a BOM at the very start is
    skipped; `retry` takes only ASCII digits.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._started = False
        self._skip_lf = False  # the last chunk ended in CR: a leading LF belongs to it
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> Iterator[Event]:
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = False
        self._buf += chunk
        if not self._started:
            if len(self._buf) < 3 and b"\xef\xbb\xbf".startswith(self._buf):
                return  # maybe a BOM still arriving
            if self._buf.startswith(b"\xef\xbb\xbf"):
                self._buf = self._buf[3:]
            self._started = True
        while True:
            cr = self._buf.find(b"\r")
            lf = self._buf.find(b"\n")
            if cr < 0 and lf < 0:
                return
            if cr >= 0 and (lf < 0 or cr < lf):
                line, end = self._buf[:cr], cr + 1
                if end < len(self._buf):
                    if self._buf[end : end + 1] == b"\n":
                        end += 1
                else:
                    self._skip_lf = True
            else:
                line, end = self._buf[:lf], lf + 1
            self._buf = self._buf[end:]
            event = self._line(line.decode("utf-8", "replace"))
            if event is not None:
                yield event

    def _line(self, line: str) -> Event | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Event | None:
        if self._id is not None:
            self.last_event_id = self._id
        if not self._data:
            self._event = ""
            return None
        event = Event(
            data="\n".join(self._data),
            event=self._event or "message",
            id=self.last_event_id,
            retry_ms=self.retry_ms,
        )
        self._data = []
        self._event = ""
        return event
