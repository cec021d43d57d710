"""serial connect: a person's interactive terminal on a port (Ctrl-] quits).

The port is opened exclusively like watch does, so connect is refused while a
supervisor (or tio, minicom, ...) holds it, and the refusal names the holder.
With stdin not a terminal, connect copies stdin to the port, then prints what
the board says until it has been quiet for IDLE_S.
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
    data = sys.stdin.buffer.read()
    if data:
        port.write(data)
    fd = device.fileno(port)
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < IDLE_S:
        if fd is not None and not select.select([fd], [], [], 0.02)[0]:
            continue
        if _pump_out(port):
            quiet_since = time.monotonic()
        elif fd is None:
            time.sleep(0.02)
