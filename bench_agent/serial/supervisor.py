"""The serial supervisor: one detached process per target that owns all its interfaces.

    python -m bench_agent.serial.supervisor --state-dir DIR --target T --config JSON [--ready-fd N]
        [--started-by JSON]

Start-up, in order: take the target's supervisor lock (a second watch is
refused), check the logs' gap sidecars (see logstore), open every port
exclusively (any failure ends start-up with that error, nothing left
running), pick the next capture epoch, record a gap on any
log whose previous capture did not stop cleanly, write an epoch-start record,
serve the control socket, write the discovery file (with ``--started-by``,
who started it: ``bench_agent.daemons.starter``), report ready on
``--ready-fd``. SIGTERM or the ``stop`` request end it cleanly: stop records,
discovery file and socket removed.
"""

from __future__ import annotations

import binascii
import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

TYPE_CHECKING = False  # nor typing, argparse or datetime: a capture runs per board (docs/scale.md)
if TYPE_CHECKING:
    from typing import Any

from bench_agent.errors import Busy, NotConfigured, PanioError, UsageError
from bench_agent.private import private_dir, write_private
from bench_agent.serial import device, files, matcher
from bench_agent.serial.channel import SEND_LOCK_WAIT_S, Channel
from bench_agent.serial.control import ControlServer, Sent
from bench_agent.serial.logstore import GAP, START, STOP, LogWriter, repair_sidecars
from bench_agent.daemons.signals import set_on

MODULE = files.SUPERVISOR
DRAIN_S = 2.0  # how long a stopping supervisor lets the waits it ended write their answers


class Supervisor:
    def __init__(self, state: Path, target: str, configs: list[dict[str, Any]],
                 started_by: dict[str, Any] | None = None) -> None:
        self.state, self.target, self.configs, self.started_by = state, target, configs, started_by
        self.stopping = threading.Event()
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        self.channels: dict[str, Channel] = {}
        self.epoch = 0
        self.server: ControlServer | None = None

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._lock()
        for cfg in self.configs:  # a log of older panio is walked once here, before a port can overflow unread
            repair_sidecars(files.log_path(self.target, cfg["name"], self.state))
        ports = self._open_all()
        writers = {c["name"]: LogWriter(files.log_path(self.target, c["name"], self.state)) for c in self.configs}
        self.epoch = self._next_epoch(writers)
        now = time.time_ns()
        for cfg in self.configs:
            w = writers[cfg["name"]]
            if w.last is not None and w.last.kind != STOP:
                w.note(GAP, self.epoch, now, reason=f"capture epoch {w.last.epoch} ended without a clean stop",
                       previous_epoch=w.last.epoch)
            w.note(START, self.epoch, now, pid=os.getpid(), device=cfg["device"], baud=cfg.get("baud"))
            self.channels[cfg["name"]] = Channel(cfg, w, self.epoch, ports[cfg["name"]])
        self.server = ControlServer(files.socket_address(self.target, self.state), self.handle)
        self.server.start()
        for ch in self.channels.values():
            ch.start()
        self._write_discovery()

    def _lock(self) -> None:
        path = files.target_dir(self.target, self.state) / "supervisor.lock"
        private_dir(path.parent)
        self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock_fd, 32, 0).decode("ascii", "replace").strip()
            raise Busy(f"serial capture for {self.target!r} is already running"
                       + (f" (supervisor pid {holder})" if holder.isdigit() else ""),
                       target=self.target, pid=int(holder) if holder.isdigit() else None) from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)  # so a refused second watch can name us

    def _open_all(self) -> dict[str, Any]:
        ports: dict[str, Any] = {}
        try:
            for cfg in self.configs:
                ports[cfg["name"]] = device.open_port(cfg)
        except PanioError:
            for p in ports.values():
                p.close()
            raise
        return ports

    def _next_epoch(self, writers: dict[str, LogWriter]) -> int:
        path = files.target_dir(self.target, self.state) / "epoch"
        try:
            last = int(path.read_text())
        except (FileNotFoundError, ValueError):
            last = 0
        last = max([last] + [w.last.epoch for w in writers.values() if w.last is not None])
        _write_atomic(path, f"{last + 1}\n")
        return last + 1

    def _write_discovery(self) -> None:
        info = {"name": f"serial-{self.target}", "kind": "serial", "target": self.target, "pid": os.getpid(),
                "epoch": self.epoch, "started": self.started, "socket": files.socket_address(self.target, self.state),
                "argv": sys.argv, "state_dir": str(self.state), "started_by": self.started_by,
                "interfaces": [{"name": c["name"], "device": c["device"], "baud": c.get("baud"),
                                "log": str(files.log_path(self.target, c["name"], self.state))} for c in self.configs]}
        path = files.discovery_path(self.target, self.state)
        private_dir(path.parent)
        _write_atomic(path, json.dumps(info, indent=2) + "\n")

    def run_until_stopped(self) -> None:
        while not self.stopping.wait(3600):
            pass
        self.shutdown()

    def shutdown(self) -> None:
        if self.server:
            self.server.close()
        for ch in self.channels.values():
            ch.stop()
            ch.writer.note(STOP, self.epoch, time.time_ns(), reason="stopped")
            ch.writer.close()
        if self.server:
            self.server.drain(DRAIN_S)
        try:
            files.discovery_path(self.target, self.state).unlink()
        except FileNotFoundError:
            pass

    # -- requests -------------------------------------------------------------------------------

    def handle(self, req: dict[str, Any], conn: socket.socket) -> Any:
        """The answer to ``req``; ``conn``, the connection it came on, may be answered directly (``Sent``)."""
        op = req.get("op")
        if op in ("hello", "status"):
            return self.status()
        if op == "stop":
            self.stopping.set()
            return {"stopping": True, "pid": os.getpid(), "epoch": self.epoch}
        ch = self._channel(req.get("iface"))
        if op == "send":
            return self._send(ch, req)
        if op == "transact":
            return self._transact(ch, req, conn)
        if op == "wait":
            return self._wait(ch, req)
        if op == "sense":
            return {"signal": req["signal"], "asserted": device.read_signal(ch.require_port(), req["signal"])}
        if op == "dtr":
            with ch.transaction:
                device.pulse_dtr(ch.require_port(), int(req["ms"]))
            return {"interface": ch.name, "pulse_ms": int(req["ms"])}
        raise UsageError(f"unknown supervisor request {op!r}")

    def _channel(self, name: str | None) -> Channel:
        if name is None and len(self.channels) == 1:
            return next(iter(self.channels.values()))
        if name not in self.channels:
            raise NotConfigured(f"the supervisor of {self.target!r} has no interface {name!r} "
                                f"(interfaces: {', '.join(self.channels)})",
                                hint=f"restart it after changing the lab: `panio serial stop {self.target}` then watch",
                                interfaces=list(self.channels))
        return self.channels[name]

    @staticmethod
    def _data(req: dict[str, Any]) -> bytes:
        # binascii itself: what base64.b64decode does with a str, less its Python wrapper (every send and transact)
        return binascii.a2b_base64(req["data_b64"]) if "data_b64" in req else req.get("text", "").encode()

    def _send(self, ch: Channel, req: dict[str, Any]) -> dict[str, Any]:
        if not ch.transaction.acquire(timeout=SEND_LOCK_WAIT_S):
            raise Busy(f"a transaction holds interface {ch.name!r}; try again when it ends", interface=ch.name)
        try:
            before = ch.cursor
            sent = ch.send(self._data(req), int(req.get("pace_ms", 0)))
        finally:
            ch.transaction.release()
        return {"interface": ch.name, "sent_bytes": sent, "epoch": self.epoch, "cursor": before}

    def _transact(self, ch: Channel, req: dict[str, Any], conn: socket.socket) -> Any:
        rx = matcher.compile_pattern(req["until"])
        timeout_ms = int(req.get("timeout_ms", 30000))
        max_bytes, max_output = int(req.get("max_bytes", 65536)), int(req.get("max_output_bytes", 1 << 20))
        if not ch.transaction.acquire(timeout=timeout_ms / 1000):
            raise Busy(f"another transaction holds interface {ch.name!r}", interface=ch.name)
        try:
            since = ch.cursor
            sent = ch.send(self._data(req), int(req.get("pace_ms", 0)))
            started = time.monotonic()
            if rx is not None:  # the reader thread answers as the bytes arrive
                pending = matcher.Pending(rx, since, max_bytes, max_output, sent, started, conn)
                if ch.await_answer(pending, timeout_ms / 1000):
                    return Sent(pending.rest)
            result = matcher.wait(ch, since=since, rx=rx, timeout_ms=timeout_ms, max_bytes=max_bytes, started=started)
        finally:
            ch.transaction.release()
        result["sent_bytes"] = sent
        return matcher.fit_output(result, max_output)

    def _wait(self, ch: Channel, req: dict[str, Any]) -> dict[str, Any]:
        result = matcher.wait(ch, since=int(req["since"]), rx=matcher.compile_pattern(req.get("pattern")),
                              timeout_ms=int(req.get("timeout_ms", 30000)), max_bytes=int(req.get("max_bytes", 65536)),
                              follow=bool(req.get("follow")), include_pending=bool(req.get("include_pending")))
        asked = req.get("epoch")
        result["epoch_changed"] = asked is not None and int(asked) != self.epoch
        return matcher.fit_output(result, int(req.get("max_output_bytes", 1 << 20)))

    def status(self) -> dict[str, Any]:
        return {"target": self.target, "pid": os.getpid(), "epoch": self.epoch, "started": self.started,
                "interfaces": {name: {"device": ch.cfg["device"], "baud": ch.cfg.get("baud"),
                                      "real_device": os.path.realpath(ch.cfg["device"])
                                      if ch.cfg["device"].startswith("/") else ch.cfg["device"],
                                      **ch.status()} for name, ch in self.channels.items()}}


def _write_atomic(path: Path, text: str) -> None:
    write_private(path, text.encode())


def _report(fd: int | None, obj: dict[str, Any]) -> None:
    if fd is None:
        return
    try:
        os.write(fd, json.dumps(obj).encode() + b"\n")
        os.close(fd)
    except OSError:
        pass


USAGE = f"usage: python -m {MODULE} --state-dir DIR --target T --config JSON [--ready-fd N] [--started-by JSON]"


def _options(argv: list[str]) -> dict[str, Any]:
    """The options panio passes (``--name value`` or ``--name=value``), without argparse: it and what it imports
    (gettext, locale, shutil and its compressors) are a fifth of an idle capture's own memory."""
    known, got = ("state-dir", "target", "config", "ready-fd", "started-by"), {"ready-fd": None, "started-by": None}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or name not in known:
            raise SystemExit(USAGE if arg in ("-h", "--help") else f"{USAGE}\nunknown argument {arg!r}")
        got[name] = value if eq else next(args, None)
        if got[name] is None:
            raise SystemExit(f"{USAGE}\n{arg} needs a value")
    missing = [f"--{k}" for k in known[:3] if k not in got]
    if missing:
        raise SystemExit(f"{USAGE}\nmissing {', '.join(missing)}")
    if got["ready-fd"] is not None:
        if not got["ready-fd"].isdigit():
            raise SystemExit(f"{USAGE}\n--ready-fd takes a number")
        got["ready-fd"] = int(got["ready-fd"])
    return got


def main(argv: list[str] | None = None) -> int:
    a = _options(sys.argv[1:] if argv is None else argv)
    by = a["started-by"]
    sup = Supervisor(Path(a["state-dir"]), a["target"], json.loads(a["config"]), json.loads(by) if by else None)
    set_on(sup.stopping, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sup.start()
    except PanioError as err:
        _report(a["ready-fd"], {"ok": False, "error": err.to_json()})
        return 1
    _report(a["ready-fd"], {"ok": True, "pid": os.getpid(), "epoch": sup.epoch})
    sup.run_until_stopped()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
