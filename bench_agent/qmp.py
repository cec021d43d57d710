"""A small QMP client: QEMU's machine protocol, JSON lines over a unix socket.

Used by the QEMU board's power control, the ``qmp`` video backend
(``screendump``) and the ``qmp`` HID backend (``input-send-event``). Events
interleave with replies, so ``execute`` skips every line that carries an
``event`` key. QEMU serves one client per ``-qmp`` socket; the QEMU board
gives each role its own socket.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from bench_agent.errors import DeviceError, Timeout, Unreachable


class QMPClient:
    def __init__(self, path: str, timeout_s: float = 5.0) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        try:
            self._sock.connect(path)
        except OSError as exc:
            self._sock.close()
            raise Unreachable(f"QMP socket {path}: {exc.strerror or exc}", hint="is the QEMU board running?",
                              device=path) from exc
        self._file = self._sock.makefile("rb")
        self._read()  # the greeting
        self.execute("qmp_capabilities")

    def execute(self, command: str, **arguments: Any) -> Any:
        msg: dict[str, Any] = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        try:
            self._sock.sendall(json.dumps(msg).encode() + b"\n")
        except OSError as exc:
            raise Unreachable(f"QMP socket {self.path}: {exc}", device=self.path) from exc
        while True:
            reply = self._read()
            if "event" in reply:
                continue
            if "error" in reply:
                raise DeviceError(f"QMP {command}: {reply['error'].get('desc', reply['error'])}", device=self.path)
            return reply.get("return")

    def _read(self) -> dict[str, Any]:
        try:
            line = self._file.readline()
        except socket.timeout as exc:
            raise Timeout(f"QMP socket {self.path} did not answer", device=self.path) from exc
        except OSError as exc:
            raise Unreachable(f"QMP socket {self.path}: {exc}", device=self.path) from exc
        if not line:
            raise Unreachable(f"QMP socket {self.path} closed (QEMU exited?)", device=self.path)
        return json.loads(line)

    def close(self) -> None:
        for closer in (self._file.close, self._sock.close):
            try:
                closer()
            except OSError:
                pass

    def __enter__(self) -> QMPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_socket(path: str, timeout_s: float) -> None:
    """Wait until a QMP socket accepts connections (QEMU creates it at start-up)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    raise Timeout(f"QMP socket {path} did not appear within {timeout_s:g} s", device=path)
