"""A socket:// port read as the capture's reader thread reads it (``device.read_now``): one read of pyserial's
non-blocking socket, with what pyserial's own ``read`` would say at the edges (nothing there, the peer gone)."""

from __future__ import annotations

import select
import socket

import pytest
import serial

from bench_agent.serial import device


@pytest.fixture
def link():
    """A socket:// port (pyserial's) connected to a loopback peer this test writes with."""
    server = socket.create_server(("127.0.0.1", 0))
    port = serial.serial_for_url(f"socket://127.0.0.1:{server.getsockname()[1]}", timeout=0)
    peer, _ = server.accept()
    server.close()
    yield port, peer
    port.close()
    peer.close()


def readable(port, timeout_s: float = 10) -> bool:
    return bool(select.select([device.fileno(port)], [], [], timeout_s)[0])


def test_a_read_takes_what_the_socket_holds_and_nothing_is_empty(link):
    port, peer = link
    assert device.read_now(port) == b""  # nothing sent yet: no wait, no error
    block = bytes(range(256)) * 64
    peer.sendall(block)
    got = b""
    while len(got) < len(block) and readable(port):
        got += device.read_now(port)
    assert got == block
    assert device.read_now(port) == b""


def test_a_read_is_bounded_by_its_limit(link):
    port, peer = link
    peer.sendall(b"x" * 1000)
    assert readable(port)
    first = device.read_now(port, 100)
    assert first == b"x" * 100
    rest = b""
    while len(rest) < 900 and readable(port):
        rest += device.read_now(port)
    assert rest == b"x" * 900


def test_the_peer_closing_is_a_lost_device(link):
    port, peer = link
    peer.sendall(b"last words\r\n")
    peer.close()
    assert readable(port)
    assert device.read_now(port) == b"last words\r\n"
    assert readable(port)
    with pytest.raises(serial.SerialException, match="disconnected"):
        device.read_now(port)
