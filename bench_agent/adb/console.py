"""An Android target's console: a kept adb shell (or ``logcat``) stream as a serial port of the capture.

The serial supervisor opens ``adb://SERIAL`` as it opens any port
(``serial.device.open_port``): ``open`` checks the device with the ``adb``
binary (``client.ready``: attached, authorized, connected when it is
HOST:PORT), then asks the adb server itself for the device's ``shell:``
service over one socket (the server's smart-socket protocol, adb's
SERVICES.TXT: ``host:transport:SERIAL``, then ``shell:``; what `adb shell`
sends, less the client process). What `serial send` writes goes to that
socket and what comes back is the board's output, so transact, wait and the
log store work unchanged, and a command costs a write to a kept shell, not an
adb process. ``adb://SERIAL?stream=logcat`` reads ``logcat`` instead
(read-only).

Why the socket and not an `adb shell` child: the server writes a reply's
pieces (the echo, the output, the prompt) to its client apart, without
TCP_NODELAY, so each piece after the first waited for the client's delayed
ACK, ~40 ms a transact through the `adb` binary (measured with
benchmarks/adb.py); on its own socket panio acknowledges at once
(TCP_QUICKACK before each read).

When the device goes away (reboot, cable) the server closes the stream:
``read_now`` raises ``SerialException`` with the reason, the capture records
a gap, and its reopen loop calls ``open`` until adb sees the device again.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import parse_qs, urlsplit

import serial

from bench_agent.adb import client

SERVICES = {"shell": b"shell:", "logcat": b"shell:logcat -v threadtime"}
DEFAULT_SERVER_PORT = 5037
WRITE_TIMEOUT_S = 10.0


def parse(device: str) -> tuple[str, str]:
    """``adb://SERIAL[?stream=shell|logcat]`` -> (serial, stream)."""
    parts = urlsplit(device)
    stream = parse_qs(parts.query).get("stream", ["shell"])[-1]
    return parts.netloc or parts.path.lstrip("/"), stream


def server_address() -> tuple[str, int]:
    """The adb server the ``adb`` binary uses too (ANDROID_ADB_SERVER_PORT, else 5037, on loopback)."""
    return "127.0.0.1", int(os.environ.get("ANDROID_ADB_SERVER_PORT") or DEFAULT_SERVER_PORT)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise serial.SerialException("the adb server closed the connection")
        buf += part
    return buf


def _request(sock: socket.socket, service: bytes) -> None:
    """One smart-socket request: 4 hex digits of length, the service; OKAY, or FAIL and the reason."""
    sock.sendall(b"%04x" % len(service) + service)
    status = _recv_exactly(sock, 4)
    if status != b"OKAY":
        why = _recv_exactly(sock, int(_recv_exactly(sock, 4), 16)).decode("utf-8", "replace")
        raise serial.SerialException(f"adb server: {why or status!r}")


class AdbShellPort:
    """The part of pyserial's port interface the capture uses, over an adb shell stream."""

    def __init__(self, device: str) -> None:
        self.port = device
        self.serial, self.stream = parse(device)
        self.sock: socket.socket | None = None
        self.dtr = False

    @property
    def is_open(self) -> bool:
        return self.sock is not None

    def open(self) -> None:
        if self.stream not in SERVICES:
            raise serial.SerialException(f"unknown adb stream {self.stream!r} (shell or logcat)")
        client.ready(self.serial)
        try:
            sock = socket.create_connection(server_address(), timeout=10)
        except OSError as exc:
            raise serial.SerialException(f"cannot reach the adb server: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _request(sock, b"host:transport:" + self.serial.encode())
            _request(sock, SERVICES[self.stream])
        except (OSError, serial.SerialException):
            sock.close()
            raise
        sock.settimeout(WRITE_TIMEOUT_S)  # reads come after select says readable; a write waits at most this
        self.sock = sock

    def fileno(self) -> int:
        if self.sock is None:
            raise serial.SerialException("not open")
        return self.sock.fileno()

    def read_now(self, limit: int) -> bytes:
        sock = self.sock
        if sock is None:
            raise serial.SerialException("not open")
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            data = sock.recv(limit)
        except OSError as exc:
            raise serial.SerialException(self._why_gone(str(exc))) from exc
        if not data:
            raise serial.SerialException(self._why_gone("closed"))
        return data

    def _why_gone(self, how: str) -> str:
        try:
            now = client.state(self.serial)
        except Exception:  # noqa: BLE001 - the reason is a courtesy; the gap is recorded either way
            now = "unknown"
        return f"adb {self.stream} on {self.serial} ended ({how}; device {now or 'not attached'})"

    def read(self, size: int = 1) -> bytes:
        return self.read_now(size)

    @property
    def in_waiting(self) -> int:
        return 0

    def write(self, data: bytes) -> int:
        if self.stream != "shell":
            raise serial.SerialException("adb logcat takes no input: send to the shell interface")
        sock = self.sock
        if sock is None:
            raise serial.SerialException(f"adb shell on {self.serial} is not open")
        try:
            sock.sendall(data)
        except OSError as exc:
            raise serial.SerialException(f"adb shell on {self.serial} is gone: {exc}") from exc
        return len(data)

    def flush(self) -> None:
        pass

    def reset_input_buffer(self) -> None:
        pass

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()
