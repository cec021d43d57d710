"""Debian's real ser2net on a loopback port, exporting one device as rfc2217:// or socket://.

The YAML is written the way docs/remote-serial.md tells a lab to write it:
``max-connections: 1``, no ``kickolduser``, ``dev-to-net-bufsize: 4096`` (a
PTY floods faster than any adapter), plus ``nouucplock`` (tests run many PTYs
side by side, and uucp locks in /var/lock would outlive a killed ser2net).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SER2NET = shutil.which("ser2net") or "/usr/sbin/ser2net"
ACCEPTERS = {"rfc2217": "telnet(rfc2217),tcp", "socket": "tcp"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(device: str, kind: str, port: int, baud: int = 115200, bufsize: int = 4096) -> str:
    return (f"connection: &panio\n"
            f"  accepter: {ACCEPTERS[kind]},127.0.0.1,{port}\n"
            f"  connector: serialdev(nouucplock=true),{device},{baud}n81,local\n"
            f"  options:\n"
            f"    max-connections: 1\n"
            f"    dev-to-net-bufsize: {bufsize}\n")


class Ser2net:
    """One ser2net process (``-n -d -c FILE``); ``url`` is what a lab file names as the device."""

    def __init__(self, root: Path, device: str, kind: str, port: int | None = None, bufsize: int = 4096) -> None:
        self.root, self.kind, self.port = root, kind, port or free_port()
        root.mkdir(parents=True, exist_ok=True)
        self.conf = root / f"ser2net-{self.port}.yaml"
        self.conf.write_text(config(os.path.realpath(device), kind, self.port, bufsize=bufsize))
        self.url = f"{kind}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        log = open(self.root / f"ser2net-{self.port}.log", "a")
        self.proc = subprocess.Popen([SER2NET, "-n", "-d", "-c", str(self.conf)], stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while not self.listening():
            assert self.proc.poll() is None, (self.root / f"ser2net-{self.port}.log").read_text()
            assert time.monotonic() < deadline, "ser2net did not listen within 60 s"
            time.sleep(0.02)

    def listening(self) -> bool:
        """True when the port accepts connections (checked via /proc, so it never takes ser2net's one slot)."""
        with open("/proc/net/tcp") as f:
            rows = [line.split() for line in list(f)[1:]]
        return any(r[1].endswith(f":{self.port:04X}") and r[3] == "0A" for r in rows)

    def kill(self) -> None:
        """kill -9, as a crash or an operator's restart would end it, and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
