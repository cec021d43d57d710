"""The netboot daemon: one detached process per target that runs and supervises its server.

    python -m bench_agent.netboot.daemon --state-dir DIR --target T --config JSON [--ready-fd N]

Start-up, in order: take the target's netboot lock (a second start is
refused), refuse a primary NIC, bring the link up and put panio's address on
it, start the server (dnsmasq or panio's TFTP), write the discovery file,
report ready (or the start-up error) as one JSON line on ``--ready-fd``. A
server that dies is restarted, at most ``MAX_RESTARTS`` times a minute.
SIGTERM ends it cleanly: server stopped, panio's address removed from the link,
discovery file gone. ``panio daemons`` lists it as ``netboot-<target>``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_agent.errors import Busy, InternalError, PanioError
from bench_agent.netboot import channel as netboot
from bench_agent.netboot.settings import Settings
from bench_agent.private import open_private, private_dir, write_private
from bench_agent.daemons.signals import set_on

MAX_RESTARTS = 5
CHECK_S = 0.5


class Daemon:
    def __init__(self, state: Path, s: Settings) -> None:
        self.state, self.s = state, s
        self.folder = netboot.target_dir(s.target, state)
        self.stopping = threading.Event()
        self.added_address = False
        self.server = None
        self.restarts: list[float] = []

    def start(self) -> dict[str, Any]:
        self._lock()
        netboot.check_interface(self.s)
        if not self.s.loopback:
            from bench_agent.netboot import links as netif_links

            netif_links.set_admin(self.s.interface, True)
            # an address panio added (now, or by a predecessor killed before it could clean up) goes at stop;
            # one the host's own configuration put there stays
            marker = self.folder / "address-added"
            if netif_links.add_address(self.s.interface, self.s.address):
                write_private(marker, f"{self.s.interface} {self.s.address}\n".encode())
            self.added_address = marker.exists()
        from bench_agent.netboot.backends import make

        self.server = make(self.s, self.folder)
        self.server.start()
        return self._write_discovery()

    def _lock(self) -> None:
        private_dir(self.folder)  # 0700 with its parents, 0600 files, whatever the umask (docs/security.md)
        self._lock_fd = open_private(self.folder / "daemon.lock", os.O_RDWR)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"netboot for {self.s.target!r} is already starting or running", target=self.s.target) from None

    def _write_discovery(self) -> dict[str, Any]:
        info = {"name": f"netboot-{self.s.target}", "kind": "netboot", "target": self.s.target, "pid": os.getpid(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "server": self.s.server,
                "interface": self.s.interface, "address": None if self.s.loopback else self.s.address,
                "tftp_root": self.s.tftp_root, "tftp_port": self.s.tftp_port, "log": str(self.folder / "server.log"),
                "argv": sys.argv, "state_dir": str(self.state)}
        path = netboot.discovery_path(self.s.target, self.state)
        private_dir(path.parent)
        write_private(path, (json.dumps(info, indent=2) + "\n").encode())
        return info

    def supervise(self) -> None:
        while not self.stopping.wait(CHECK_S):
            if not self.server.alive():
                self._restart()

    def _restart(self) -> None:
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < 60] + [now]
        if len(self.restarts) > MAX_RESTARTS:
            print(f"netboot: server of {self.s.target} died {MAX_RESTARTS} times within a minute; giving up",
                  file=sys.stderr, flush=True)
            self.stopping.set()
            return
        print(f"netboot: server of {self.s.target} died; restarting", file=sys.stderr, flush=True)
        try:
            self.server.start()
        except PanioError as exc:
            print(f"netboot: restart failed: {exc.message}", file=sys.stderr, flush=True)

    def shutdown(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.added_address:
            from bench_agent.netboot import links as netif_links

            try:
                netif_links.remove_address(self.s.interface, self.s.address)
                (self.folder / "address-added").unlink(missing_ok=True)
            except PanioError as exc:  # the adapter may be gone (unplugged): nothing left to clean
                print(f"netboot: could not remove {self.s.address}: {exc.message}", file=sys.stderr, flush=True)
        path = netboot.discovery_path(self.s.target, self.state)
        try:
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def _report(fd: int | None, reply: dict[str, Any]) -> None:
    if fd is not None:
        os.write(fd, (json.dumps(reply) + "\n").encode())
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=netboot.MODULE)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--ready-fd", type=int)
    a = p.parse_args(argv)
    state = Path(a.state_dir)
    os.environ["PANIO_STATE_DIR"] = str(state)
    try:  # checked again here (values.py): the config came on a command line, not from a validated lab
        settings = Settings(**json.loads(a.config))
    except PanioError as exc:
        _report(a.ready_fd, {"ok": False, "error": exc.to_json()})
        return exc.exit_status
    daemon = Daemon(state, settings)
    set_on(daemon.stopping)
    try:
        info = daemon.start()
    except PanioError as exc:
        daemon.shutdown()
        _report(a.ready_fd, {"ok": False, "error": exc.to_json()})
        return exc.exit_status
    except Exception as exc:  # noqa: BLE001 - start-up must always answer the waiting CLI
        daemon.shutdown()
        err = InternalError(f"netboot daemon failed to start: {type(exc).__name__}: {exc}")
        _report(a.ready_fd, {"ok": False, "error": err.to_json()})
        raise
    _report(a.ready_fd, {"ok": True, "info": info})
    try:
        daemon.supervise()
    finally:
        daemon.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
