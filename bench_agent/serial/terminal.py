"""serial connect: a person's interactive terminal on a port (Ctrl-] quits).

The port is opened exclusively like watch does, so connect is refused while a
supervisor (or tio, minicom, ...) holds it, and the refusal names the holder.
With stdin not a terminal (a pipe, or the byte channel of ``panio serial
connect`` to a target on an SSH host), connect copies stdin to the port and
the port to stdout as they come; after the end of stdin it prints what the
board says until the board has been quiet for IDLE_S.
"""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Any

import serial

from bench_agent.errors import Unreachable
from bench_agent.serial import device

QUIT = b"\x1d"
IDLE_S = 0.5


def run(target: str, iface: dict[str, Any]) -> dict[str, Any]:
    port = device.open_port(iface, timeout=0)
    try:
        if os.isatty(sys.stdin.fileno()):
            _interactive(port, iface)
        else:
            _piped(port)
    except (serial.SerialException, OSError) as exc:
        raise Unreachable(f"lost serial device {iface['device']}: {exc}", device=iface["device"]) from exc
    finally:
        port.close()
    return {"target": target, "interface": iface["name"], "closed": True}


def _pump_out(port) -> bool:
    data = device.read_now(port)
    if data:
        os.write(sys.stdout.fileno(), data)
    return bool(data)


def _interactive(port, iface: dict[str, Any]) -> None:
    import termios
    import tty

    stdin = sys.stdin.fileno()
    saved = termios.tcgetattr(stdin)
    try:
        tty.setraw(stdin)  # before the banner, so whatever is typed after it goes to the board as is
        sys.stderr.write(f"panio: connected to {iface['device']} ({iface['name']}); Ctrl-] quits\r\n")
        sys.stderr.flush()
        fd = device.fileno(port)
        watched, poll_s = ([stdin, fd], 0.5) if fd is not None else ([stdin], 0.02)  # rfc2217 has no fd: poll
        while True:
            ready, _, _ = select.select(watched, [], [], poll_s)
            if fd is None or fd in ready:
                _pump_out(port)
            if stdin in ready:
                key = os.read(stdin, 1024)
                if not key or QUIT in key:
                    return
                port.write(key)
    finally:
        termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        sys.stderr.write("\r\npanio: disconnected\n")


def _piped(port) -> None:
    """stdin to the port and the port to stdout, neither waiting on the other: a long paste into a board that
    echoes it is taken only as fast as the board reads, while what it says keeps flowing out."""
    stdin, fd = sys.stdin.fileno(), device.fileno(port)
    pending = b""  # read from stdin, not yet taken by the port
    ended_at: float | None = None  # stdin's end, or the board's last word after it: then wait for quiet
    while ended_at is None or pending or time.monotonic() - ended_at < IDLE_S:
        readers = ([stdin] if ended_at is None and not pending else []) + ([fd] if fd is not None else [])
        writers = [fd] if pending and fd is not None else []
        ready, writable, _ = select.select(readers, writers, [], 0.02 if fd is None else 0.1)
        if (fd is None or fd in ready) and _pump_out(port) and ended_at is not None:
            ended_at = time.monotonic()
        if pending and (fd is None or fd in writable):
            pending = pending[_write_some(port, fd, pending):]
        if stdin in ready:
            data = os.read(stdin, 65536)
            pending += data
            if not data:
                ended_at = time.monotonic()


def _write_some(port, fd: int | None, data: bytes) -> int:
    """Write what the port takes now (a descriptor's non-blocking write), or a small piece (a URL port)."""
    if fd is None:
        return port.write(data[:4096]) or 0
    try:
        return os.write(fd, data[:4096])
    except BlockingIOError:
        return 0
