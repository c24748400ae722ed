"""The transport: kept-alive connections the server closed are opened again, unreachable
servers are retried with backoff when asked, error answers become `AnteroomError`."""

import socket
import time

import pytest

from anteroom import AnteroomError, Queue
from conftest import Server, eventually


def closed_by_peer(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def test_a_connection_the_server_closed_when_idle_is_opened_again():
    server = Server(["--idle-timeout-ms", "200"])
    try:
        q = Queue("idle", server.url)
        q.push(1)
        # The server closes the kept-alive connection (on a timer of about a second).
        (conn,) = q._pool._idle
        sock = conn._conn.sock
        assert sock is not None
        eventually(lambda: closed_by_peer(sock), timeout=5, what="the server's close")
        q.push(2)
        assert conn.requests == 3  # the second push was sent again on a new connection
        assert q.stats()["pushed"] == 2  # each push stored once
    finally:
        server.stop()


def test_an_unreachable_server_is_retried_with_backoff_then_raised():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    q = Queue("q", f"http://127.0.0.1:{port}", retries=3)
    started = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        q.stats()
    # Three waits of 50-100, 100-200, 200-400 ms.
    assert 0.3 <= time.monotonic() - started < 3


def test_errors_carry_status_code_and_message(server):
    keyed = Server(env={"ANTEROOM_ADMIN_KEY": "admin-key-for-the-test"})
    try:
        with pytest.raises(AnteroomError) as err:
            Queue("q", keyed.url, key="wrong").stats()
        assert (err.value.status, err.value.code) == (401, "unauthorized")
        assert Queue("q", keyed.url, key="admin-key-for-the-test").stats()["pushed"] == 0
    finally:
        keyed.stop()
