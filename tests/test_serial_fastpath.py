"""A transact answered by the interface's reader thread (``matcher.Pending``), on a real PTY and a real socket.

The reader thread sends a transact's reply itself as soon as the board's answer arrives (no hand-off to the
request's thread), but only what is cheap there; everything else goes back to the request's thread, and the
capture never waits on a client or a pattern.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time

import pytest

from bench_agent.serial import device, matcher
from bench_agent.serial.channel import Channel
from bench_agent.serial.logstore import DATA, SENT, LogWriter, records_backward
from jobhelp import wait_for


@pytest.fixture
def board(tmp_path):
    """A capture channel on a PTY whose far end (the board) the test writes to."""
    master, slave = os.openpty()
    cfg = {"name": "console", "device": os.ttyname(slave), "baud": 115200}
    writer = LogWriter(tmp_path / "console.log")
    channel = Channel(cfg, writer, 1, device.open_port(cfg))
    channel.start()
    yield channel, master
    channel.stop()
    writer.close()
    for fd in (master, slave):
        try:
            os.close(fd)
        except OSError:
            pass


class Recording(socket.socket):
    """A socket that remembers which thread sent on it."""

    senders: list[str]

    def send(self, data, flags=0):
        self.senders.append(threading.current_thread().name)
        return super().send(data, flags)


def connection() -> tuple[Recording, socket.socket]:
    ours, client = socket.socketpair()
    sock = Recording(fileno=ours.detach())
    sock.senders = []
    return sock, client


def awaiting(channel, pending, timeout_s: float = 30) -> dict:
    """``channel.await_answer`` in a thread of its own (the request's thread): its result lands in the dict."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(answered=channel.await_answer(pending, timeout_s)))
    thread.start()
    wait_for(lambda: channel.pending is pending or not thread.is_alive(), timeout_s=10, every_s=0.01)
    out["thread"] = thread
    return out


def pending_for(channel, sock, pattern: str, **bounds) -> matcher.Pending:
    return matcher.Pending(matcher.compile_pattern(pattern), channel.cursor, bounds.get("max_bytes", 65536),
                           bounds.get("max_output", 1 << 20), 4, time.monotonic(), sock)


def test_the_reader_thread_sends_the_reply_the_wait_would_have_given(board):
    channel, far = board
    sock, client = connection()
    pending = pending_for(channel, sock, "ok [0-9]+")
    since = pending.since
    out = awaiting(channel, pending)
    os.write(far, b"noise\r\nok 7\r\nafter\r\n")
    out["thread"].join(30)
    assert out["answered"] and pending.rest == b""
    assert sock.senders == ["reader-console"]  # sent by the reader thread, no hand-off
    reply = json.loads(client.recv(1 << 16))
    assert reply["ok"] and reply["result"]["sent_bytes"] == 4
    got = reply["result"]
    want = matcher.wait(channel, since=since, rx=matcher.compile_pattern("ok [0-9]+"), timeout_ms=1000)
    for key in ("elapsed_ms",):
        got.pop(key), want.pop(key)
    got.pop("sent_bytes")
    assert got == want and got["match"]["text"] == "ok 7" and got["cursor"] == since + len(b"noise\r\nok 7")
    assert channel.pending is None


def test_an_answer_that_came_before_the_wait_is_sent_at_once(board):
    channel, far = board
    sock, client = connection()
    pending = pending_for(channel, sock, "ready")
    os.write(far, b"ready\r\n")
    wait_for(lambda: channel.cursor >= pending.since + 7, timeout_s=10, every_s=0.01)
    assert channel.await_answer(pending, 30)
    assert json.loads(client.recv(1 << 16))["result"]["match"]["text"] == "ready"


def test_more_than_the_fast_bound_goes_back_to_the_request_thread(board):
    channel, far = board
    sock, _client = connection()
    pending = pending_for(channel, sock, "END")
    out = awaiting(channel, pending)
    line = b"x" * 62 + b"\r\n"
    for _ in range(matcher.FAST_BYTES // len(line) + 2):
        os.write(far, line)
    os.write(far, b"END\r\n")
    out["thread"].join(30)
    assert out["answered"] is False and sock.senders == []  # the request's thread waits as matcher.wait does
    result = matcher.wait(channel, since=pending.since, rx=pending.rx, timeout_ms=10000, started=pending.started)
    assert result["status"] == "matched" and result["bytes"] > matcher.FAST_BYTES


def test_a_pattern_too_slow_for_the_reader_goes_back_and_capture_goes_on(board):
    channel, far = board
    sock, _client = connection()
    pending = pending_for(channel, sock, "(a|aa)+c")  # ~25 ms on 22 a's (quiet): past the reader's 2 ms budget
    out = awaiting(channel, pending)
    os.write(far, b"a" * 22 + b"b")
    out["thread"].join(30)
    assert out["answered"] is False and sock.senders == []
    before = channel.cursor
    os.write(far, b"still captured\r\n")
    wait_for(lambda: channel.cursor >= before + 16, timeout_s=10, every_s=0.01)


def test_a_client_that_does_not_read_never_blocks_the_capture(board):
    channel, far = board
    sock, client = connection()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.setblocking(False)
    try:
        while True:  # fill the connection: the client reads nothing
            sock.send(b"." * 4096)
    except BlockingIOError:
        pass
    sock.setblocking(True)
    pending = pending_for(channel, sock, "ok")
    out = awaiting(channel, pending)
    os.write(far, b"ok\r\n")
    out["thread"].join(30)
    assert out["answered"] and pending.rest.endswith(b"\n") and b'"ok":true' in pending.rest  # left to send
    before = channel.cursor
    os.write(far, b"more\r\n")
    wait_for(lambda: channel.cursor >= before + 6, timeout_s=10, every_s=0.01)
    client.close()


def test_a_timeout_and_a_stop_give_the_request_back(board):
    channel, far = board
    sock, _client = connection()
    started = time.monotonic()
    assert channel.await_answer(pending_for(channel, sock, "never"), 0.2) is False
    assert 0.15 < time.monotonic() - started < 20 and channel.pending is None
    out = awaiting(channel, pending_for(channel, sock, "never"))
    channel.stop()
    out["thread"].join(30)
    assert out["answered"] is False and sock.senders == []
    assert channel.await_answer(pending_for(channel, sock, "never"), 30) is False  # not open: at once


def test_a_lost_device_gives_the_request_back(board):
    channel, far = board
    sock, _client = connection()
    out = awaiting(channel, pending_for(channel, sock, "never"))
    os.close(far)  # the PTY's far end goes: the reader's read fails
    out["thread"].join(30)
    assert out["answered"] is False and channel.state == "disconnected"


def test_the_line_sent_is_recorded_before_the_answer_to_it(board, tmp_path, monkeypatch):
    """The reader thread records the board's answer after the line that asked for it, even when the sending
    thread is slow between its write and its record: here it stalls there until the answer is readable."""
    channel, far = board

    def stalled(write):
        def stall(port, data):
            rest = write(port, data)
            os.write(far, b"the answer\r\n")  # the board answers at once
            if select.select([port.fd], [], [], 10)[0]:
                time.sleep(0.05)  # the reader thread's chance to record the answer before the line
            return rest
        return stall

    monkeypatch.setattr(device, "write_now", stalled(device.write_now))
    monkeypatch.setattr(device, "write", stalled(device.write))
    channel.send(b"ask\r")
    wait_for(lambda: channel.cursor >= 12, timeout_s=10, every_s=0.01)
    kinds = [(r.kind, r.payload) for r in reversed(list(records_backward(tmp_path / "console.log")))]
    assert kinds.index((SENT, b"ask\r")) < kinds.index((DATA, b"the answer\r\n")), kinds
