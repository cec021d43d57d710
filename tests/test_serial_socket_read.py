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


def test_what_arrives_while_the_port_opens_is_kept_and_an_explicit_reset_still_discards():
    """ser2net sends what the board printed while no one listened as soon as the capture connects; pyserial's
    ``open`` then discarded whatever had already arrived (lost on a loaded machine). The port waits here, inside
    ``open``, until the peer's bytes have arrived, so the discard would find them every time."""
    from bench_agent.serial.socket_port import KeepInputSocketSerial

    server = socket.create_server(("127.0.0.1", 0))

    class ArrivedFirst(KeepInputSocketSerial):
        def _reconfigure_port(self, *args, **kwargs):
            peer, _ = server.accept()
            peer.sendall(b"printed while nobody listened\r\n")
            self.peer = peer
            assert select.select([self._socket], [], [], 10)[0]  # arrived, before open's reset
            super()._reconfigure_port(*args, **kwargs)

    port = ArrivedFirst(None, timeout=0)
    port.port = f"socket://127.0.0.1:{server.getsockname()[1]}"
    port.open()
    try:
        assert device.read_now(port) == b"printed while nobody listened\r\n"
        port.peer.sendall(b"stale\r\n")
        assert readable(port)
        port.reset_input_buffer()  # asked for by name: discards, as pyserial's does
        assert device.read_now(port) == b""
    finally:
        port.close()
        port.peer.close()
        server.close()


def test_a_capture_opens_socket_urls_with_the_port_that_keeps_its_input():
    from bench_agent.serial.socket_port import KeepInputSocketSerial

    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = device.open_port({"device": f"socket://127.0.0.1:{server.getsockname()[1]}"})
        assert isinstance(port, KeepInputSocketSerial) and port.is_open
        port.close()
    finally:
        server.close()
