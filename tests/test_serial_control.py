"""The control socket's client: whole lines however the bytes arrive, and a bound that holds.

The client blocks on its socket with the bound set in the kernel (SO_RCVTIMEO), not with Python's
timeout (which polls before every send and receive): a far end that never answers must still end the
call after the bound, and its late answer must never pass for the answer to the next request.
"""

from __future__ import annotations

import socket
import time

import pytest

from bench_agent.errors import NotRunning, Unreachable
from bench_agent.serial.control import ControlClient


@pytest.fixture
def far_end(tmp_path):
    """A unix socket that accepts one client and lets the test answer for the supervisor."""
    address = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)
    yield address, server
    server.close()


def test_a_reply_in_pieces_and_two_in_one_read_are_whole_lines(far_end):
    address, server = far_end
    with ControlClient(address, "pico", 10) as client:
        conn, _ = server.accept()
        conn.sendall(b'{"ok":true,"result":{"text":"caf\\u00e9"}}\n{"ok":true,')  # one and a half replies
        assert client.call({"op": "status"}) == {"text": "café"}
        assert conn.recv(100) == b'{"op":"status"}\n'
        conn.sendall(b'"result":2}\n')
        assert client.call({"op": "status"}) == 2
        conn.close()
        with pytest.raises(NotRunning, match="before it answered"):
            client.call({"op": "status"})


def test_a_silent_supervisor_ends_the_call_after_the_bound_and_the_connection_is_not_reused(far_end):
    address, server = far_end
    with ControlClient(address, "pico", 0.2) as client:
        conn, _ = server.accept()
        started = time.monotonic()
        with pytest.raises(Unreachable, match="timed out"):
            client.call({"op": "status"})
        assert 0.15 < time.monotonic() - started < 10
        try:
            conn.sendall(b'{"ok":true,"result":"late"}\n')  # the answer to the call that timed out
        except BrokenPipeError:
            pass  # the client closed the connection: nothing late can land in it
        with pytest.raises(Unreachable):
            client.call({"op": "status"})
        conn.close()
