"""An Android target's console: a kept ``adb shell`` (or ``logcat``) as a serial port of the capture.

The serial supervisor opens ``adb://SERIAL`` as it opens any port
(``serial.device.open_port``): ``open`` checks the device (``client.ready``:
attached, authorized, connected when it is HOST:PORT) and starts one
``adb -s SERIAL shell -tt`` child whose stdin takes what `serial send` writes
and whose stdout is read as the board's output, so transact, wait and the log
store work unchanged, and a command costs a write to a kept shell, not an adb
process. ``adb://SERIAL?stream=logcat`` reads ``logcat`` instead (read-only).

When the device goes away (reboot, cable) the child ends: ``read_now`` raises
``SerialException`` with the reason, the capture records a gap, and its
reopen loop calls ``open`` until adb sees the device again.
"""

from __future__ import annotations

import os
import subprocess
from urllib.parse import parse_qs, urlsplit

import serial

from bench_agent.adb import client

STREAMS = {"shell": ("shell", "-tt"), "logcat": ("logcat", "-v", "threadtime")}


def parse(device: str) -> tuple[str, str]:
    """``adb://SERIAL[?stream=shell|logcat]`` -> (serial, stream)."""
    parts = urlsplit(device)
    stream = parse_qs(parts.query).get("stream", ["shell"])[-1]
    return parts.netloc or parts.path.lstrip("/"), stream


class AdbShellPort:
    """The part of pyserial's port interface the capture uses, over an ``adb shell`` child."""

    def __init__(self, device: str) -> None:
        self.port = device
        self.serial, self.stream = parse(device)
        self.proc: subprocess.Popen | None = None
        self.dtr = False

    @property
    def is_open(self) -> bool:
        return self.proc is not None

    def open(self) -> None:
        if self.stream not in STREAMS:
            raise serial.SerialException(f"unknown adb stream {self.stream!r} (shell or logcat)")
        client.ready(self.serial)
        self.proc = subprocess.Popen(client.argv(self.serial, *STREAMS[self.stream]), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        os.set_blocking(self.proc.stdout.fileno(), False)

    def fileno(self) -> int:
        if self.proc is None:
            raise serial.SerialException("not open")
        return self.proc.stdout.fileno()

    def read_now(self, limit: int) -> bytes:
        try:
            data = os.read(self.fileno(), limit)
        except BlockingIOError:
            return b""
        if not data:
            raise serial.SerialException(self._why_gone())
        return data

    def _why_gone(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        try:
            now = client.state(self.serial)
        except Exception:  # noqa: BLE001 - the reason is a courtesy; the gap is recorded either way
            now = "unknown"
        return f"adb {self.stream} on {self.serial} ended (exit {code}; device {now or 'not attached'})"

    def read(self, size: int = 1) -> bytes:
        return self.read_now(size)

    @property
    def in_waiting(self) -> int:
        return 0

    def write(self, data: bytes) -> int:
        if self.stream != "shell":
            raise serial.SerialException("adb logcat takes no input: send to the shell interface")
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (OSError, ValueError, AttributeError) as exc:
            raise serial.SerialException(f"adb shell on {self.serial} is gone: {exc}") from exc
        return len(data)

    def flush(self) -> None:
        pass

    def reset_input_buffer(self) -> None:
        pass

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
