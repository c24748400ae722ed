"""Room: check, touch, leave, and the live channel over SSE; the SSE parser on its own."""

import threading
import time

from anteroom import Room, SseParser
from conftest import eventually

ANN = "ann-" + "a" * 24  # ids a client names itself have at least 22 characters
BOB = "bob-" + "b" * 24


def test_check_touch_leave(server):
    room = Room("lobby", server.url)
    room.configure(capacity=1)
    ann = room.check(ANN)
    assert (ann["status"], ann["session"]) == ("active", ANN)
    assert ann["token"]
    bob = room.check(BOB)
    assert (bob["status"], bob["position"], bob["waiting"]) == ("waiting", 1, 1)
    assert room.touch(ANN)["status"] == "active"
    new = room.check()  # the server names a session
    assert new["status"] == "waiting" and len(new["session"]) >= 22
    assert room.leave(new["session"])["status"] == "gone"
    assert room.leave(ANN, final=True)["status"] == "gone"
    assert room.check(BOB)["status"] == "active"


def test_updates_yield_a_position_change(server):
    room = Room("live", server.url)
    room.configure(capacity=1)
    room.check(ANN)
    room.check(BOB)
    carl = "carl-" + "c" * 24
    seen: list[dict] = []
    stream = room.updates(carl)  # opening it joins the line: third, position 2

    def read() -> None:
        for status in stream:
            seen.append(status)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        eventually(lambda: any(s["position"] == 2 for s in seen), timeout=5, what="position 2")
        room.leave(ANN, final=True)  # bob goes in: carl moves up
        eventually(lambda: any(s["position"] == 1 for s in seen), timeout=5, what="position 1")
        room.leave(BOB, final=True)
        eventually(lambda: seen[-1]["status"] == "active", timeout=5, what="carl admitted")
        assert seen[-1]["token"]
        room.leave(carl, final=True)
        # The last message says gone, and the stream ends: iteration stops by itself.
        reader.join(5)
        assert not reader.is_alive()
        assert seen[-1]["status"] == "gone"
    finally:
        stream.close()
        reader.join(5)
    assert all(s["type"] == "status" and s["session"] == carl for s in seen)


def test_updates_close_ends_a_stream_from_another_thread(server):
    room = Room("idle", server.url)
    room.configure(capacity=1)
    stream = room.updates(ANN)
    assert next(stream)["status"] == "active"
    ended = threading.Event()

    def drain() -> None:
        for _ in stream:
            pass
        ended.set()

    threading.Thread(target=drain, daemon=True).start()
    time.sleep(0.2)
    stream.close()
    assert ended.wait(3)


def test_sse_parser_handles_any_chunking_and_line_ends():
    text = (
        b"\xef\xbb\xbfretry: 1000\r\n\r\n: comment\n"
        b"data: {\"a\":\r\ndata:1}\r\rid: 7\nevent: x\ndata:  two spaces\n\n"
        b"data\n\n"
    )
    expected = [("{\"a\":\n1}", "message", None), (" two spaces", "x", "7"), ("", "message", "7")]
    for size in (1, 2, 3, 5, len(text)):
        parser = SseParser()
        events = []
        for i in range(0, len(text), size):
            events.extend(parser.feed(text[i : i + size]))
        assert [(e.data, e.event, e.id) for e in events] == expected, size
        assert parser.retry_ms == 1000
