"""A small QMP client: QEMU's machine protocol, JSON lines over a unix socket.

Used by the QEMU board's power control, the ``qmp`` video backend
(``screendump``) and the ``qmp`` HID backend (``input-send-event``). Events
interleave with replies, so ``execute`` skips every line that carries an
``event`` key.

QEMU serves one client per ``-qmp`` socket: a second client's ``connect``
succeeds but waits in the socket's backlog, greeted only when the first one
closes. So panio holds a socket only for one command (``run``: connect,
greeting, then ``qmp_capabilities`` and the command in one write, close:
one round trip more than a kept connection, benchmarks/qmp_share.py), and
video, keyboard and a lab's power hook take turns on one socket. A client still
waiting for its greeting after ``TURN_S`` gets ``Busy`` naming whoever holds
the socket (``holder``), its command not sent.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from bench_agent.errors import Busy, DeviceError, Timeout, Unreachable

TURN_S = 3.0  # panio's own turns last milliseconds; a client holding the socket this long is not taking turns


class QMPClient:
    def __init__(self, path: str, timeout_s: float = 5.0, turn_s: float = TURN_S) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(turn_s)  # a full backlog blocks connect() itself until the holder lets go
        self._file = None
        try:
            self._connect(turn_s)
        except BaseException:
            self.close()
            raise
        self._sock.settimeout(timeout_s)
        self._negotiated = False  # qmp_capabilities goes out with the first command: one round trip, not two

    def _connect(self, turn_s: float) -> None:
        try:
            self._sock.connect(self.path)
            self._file = self._sock.makefile("rb")
            line = self._file.readline()  # the greeting: QEMU sends it when this client's turn comes
        except socket.timeout:
            raise Busy(f"QMP socket {self.path} is held by {holder(self.path) or 'another client'} "
                       f"(QEMU serves one client per -qmp socket; waited {turn_s:g} s; this command was not sent)",
                       hint="a QMP client that stays connected blocks every other user of the socket: "
                            "let it connect per command, or give it its own -qmp socket (docs/video.md)",
                       device=self.path) from None
        except OSError as exc:
            raise Unreachable(f"QMP socket {self.path}: {exc.strerror or exc}", hint="is the QEMU board running?",
                              device=self.path) from exc
        if not line:
            raise Unreachable(f"QMP socket {self.path} closed (QEMU exited?)", device=self.path)

    def execute(self, command: str, **arguments: Any) -> Any:
        msgs: list[dict[str, Any]] = [] if self._negotiated else [{"execute": "qmp_capabilities"}]
        msgs.append({"execute": command, **({"arguments": arguments} if arguments else {})})
        try:
            self._sock.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
        except OSError as exc:
            raise Unreachable(f"QMP socket {self.path}: {exc}", device=self.path) from exc
        self._negotiated = True
        for msg in msgs:
            reply = self._reply()
            if "error" in reply:
                raise DeviceError(f"QMP {msg['execute']}: {reply['error'].get('desc', reply['error'])}",
                                  device=self.path)
        return reply.get("return")

    def _reply(self) -> dict[str, Any]:
        while "event" in (reply := self._read()):
            pass
        return reply

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
        for closer in (getattr(self._file, "close", None), self._sock.close):
            try:
                if closer:
                    closer()
            except OSError:
                pass

    def __enter__(self) -> QMPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run(path: str, command: str, timeout_s: float = 5.0, turn_s: float = TURN_S, **arguments: Any) -> Any:
    """One command on its own connection: the socket is free again as soon as QEMU has answered."""
    with QMPClient(path, timeout_s, turn_s) as client:
        return client.execute(command, **arguments)


def holder(path: str) -> str | None:
    """Who holds QEMU's end of the socket at ``path``: "panio's video daemon of T (pid N)", "pid N (argv)",
    or None when ``ss`` cannot tell (not installed, or a process of another user)."""
    import subprocess

    try:
        rows = [r.split() for r in subprocess.run(["ss", "-xpH"], capture_output=True, text=True,
                                                  timeout=5).stdout.splitlines()]
    except (OSError, subprocess.SubprocessError):
        return None
    # QEMU's accepted connection: local address = the socket's path, with a process (queued ones have none)
    peers = {r[7] for r in rows if len(r) > 8 and r[1] == "ESTAB" and r[4] == path and "pid=" in r[8]}
    pids = {int(p.split("pid=")[1].split(",")[0]) for r in rows if len(r) > 8 and r[5] in peers and "pid=" in r[8]
            for p in r[8].split("),(")}
    names = [describe_pid(pid) for pid in sorted(pids)]
    return ", ".join(names) if names else None


def describe_pid(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return f"pid {pid}"
    for module, what in (("bench_agent.video.daemon", "video daemon"), ("bench_agent.hid.daemon", "HID daemon")):
        if module in argv and "--target" in argv[:-1]:
            return f"panio's {what} of {argv[argv.index('--target') + 1]!r} (pid {pid})"
    return f"pid {pid} ({' '.join(' '.join(argv).split())[:100]})"  # one line, whatever the argv held


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
