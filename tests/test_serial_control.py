"""The control socket's client: whole lines however the bytes arrive, and a bound that holds.

The client blocks on its socket with the bound set in the kernel (SO_RCVTIMEO), not with Python's
timeout (which polls before every send and receive): a far end that never answers must still end the
call after the bound, and its late answer must never pass for the answer to the next request.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from bench_agent.errors import NotRunning, Unreachable
from bench_agent.jsonlines import dump_line, load_line
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


def test_the_line_codec_writes_and_reads_exactly_what_json_does():
    """The codec reuses json's C encoder and scanner (a transact encodes two lines and decodes two): its lines
    are json's compact ones, and a line json would refuse is refused, never read as its first object."""
    reply = {"ok": True, "result": {"text": "caf\u00e9\r\n", "elapsed_ms": 0.061, "match": None, "groups": ["a", None],
                                    "cursor": 2 ** 40}}
    assert dump_line(reply) == (json.dumps(reply, separators=(",", ":")) + "\n").encode()
    assert load_line(dump_line(reply)) == reply
    assert load_line(b'  {"op":"status"} \r\n') == {"op": "status"}
    for bad in (b'{"op":"status"} {"op":"stop"}\n', b'{"op":"status"}x\n', b'{"op":\n', b"\n"):
        with pytest.raises(ValueError):
            load_line(bad)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dump_line({"when": object()})


def test_the_line_reader_gives_whole_lines_however_they_come():
    """One line in one read (taken as it came), a line in pieces, two in one read, and what is left at the end."""
    from bench_agent.serial.control import LineReader

    ours, theirs = socket.socketpair()
    with ours, theirs:
        lines = LineReader(ours)
        theirs.sendall(b'{"a":1}\n')
        assert lines.readline() == b'{"a":1}\n'
        theirs.sendall(b'{"b":')
        theirs.sendall(b"2}\n")
        assert lines.readline() == b'{"b":2}\n'
        theirs.sendall(b"one\ntwo\nthr")
        assert [lines.readline(), lines.readline()] == [b"one\n", b"two\n"]
        theirs.sendall(b"ee\n")
        assert lines.readline() == b"three\n"
        theirs.sendall(b"tail")
        theirs.shutdown(socket.SHUT_WR)
        assert lines.readline() == b"tail" and lines.readline() == b""
