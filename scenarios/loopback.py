"""Serial loopback (seed: s2–s4, s6, s7, s10 run for real on Linux and macOS).

A pseudo-terminal pair stands in for the USB-serial adapter: ``FakeDut`` plays
the board on the master side (banner, a shell that answers known commands),
panio's ``serial watch/send/log`` drive the slave side exactly as they would
drive /dev/ttyUSB0, and the assertions read the captured log. Only the far end
is simulated. A scenario whose steps need a command panio lacks is pending.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import tty
from dataclasses import dataclass, field
from pathlib import Path

from scenarios.drift import Guard
from scenarios.sandbox import Sandbox
from scenarios.scenario import Scenario, panio_argv


class FakeDut:
    """The far end of a serial console on a PTY: prints a banner, answers lines like a shell."""

    def __init__(self, banner: list[str], responses: dict[str, str] | None = None, prompt: str = "# ") -> None:
        self.banner, self.responses, self.prompt = banner, responses or {}, prompt
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.path = os.ttyname(self.slave)
        self.received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> "FakeDut":
        self._thread.start()
        return self

    def say(self, lines: list[str]) -> None:
        for line in lines:
            os.write(self.master, line.encode() + b"\r\n")

    def boot(self) -> None:
        """Print the boot banner (call it once the port is open: opening a port flushes its input)."""
        self.say(self.banner)

    def _serve(self) -> None:
        buf = b""
        while not self._stop.is_set():
            try:
                import select

                ready, _, _ = select.select([self.master], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(self.master, 1024)
            except OSError:
                return
            buf += chunk
            while re.search(rb"[\r\n]", buf):
                line, buf = re.split(rb"\r\n|\r|\n", buf, maxsplit=1)
                self._answer(line.decode(errors="replace"))

    def _answer(self, line: str) -> None:
        self.received.append(line)
        out = [line]  # a console echoes what it is sent
        if line in self.responses:
            out.append(self.responses[line])
        os.write(self.master, ("\r\n".join(out) + "\r\n" + self.prompt).encode())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass
class LoopResult:
    scenario: str
    status: str  # pass | fail | pending
    detail: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "status": self.status, "detail": self.detail}


def _seqs(obj) -> list[int]:
    if isinstance(obj, dict):
        return ([obj["seq"]] if isinstance(obj.get("seq"), int) else []) + [s for v in obj.values() for s in _seqs(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _seqs(v)]
    return []


def _banner(lb: dict) -> list[str]:
    if lb.get("banner_count"):
        return [f"boot line {i}" for i in range(1, lb["banner_count"] + 1)]
    return list(lb.get("banner", []))


def _lab_with(fixture: str, duts: dict[str, FakeDut]) -> str:
    devices = {"console": "/dev/ttyUSB0", "bmc": "/dev/ttyUSB1"}
    for iface, dut in duts.items():
        fixture = fixture.replace(f'"{devices[iface]}"', json.dumps(dut.path))
    return fixture


def run(sc: Scenario, root: Path, guard: Guard | None = None, settle_s: float = 5.0) -> LoopResult:
    guard = guard or Guard()
    lb = sc.loopback or {}
    steps = [panio_argv(s) for s in lb.get("steps", [])]
    missing = sorted({m for a in steps if (m := guard.missing(a))})
    if missing:
        return LoopResult(sc.id, "pending", [f"needs: {', '.join(missing)}"])
    main = lb.get("interface", "console")
    duts = {main: FakeDut(_banner(lb), lb.get("responses"))}
    other = "console" if main == "bmc" else "bmc"
    if f'name = "{other}"' in (sc.fixture_lab or ""):
        duts[other] = FakeDut([f"{other} idle"])
    box = Sandbox(root, safe_only=False).create(_lab_with(sc.fixture_lab or "", duts), guard.groups())
    for d in duts.values():
        d.start()
    try:
        return _drive(sc, lb, box, steps, duts, main, settle_s)
    finally:
        box.run_panio(["serial", "stop", panio_argv(lb["steps"][0])[2]])
        for d in duts.values():
            d.stop()


def _drive(sc: Scenario, lb: dict, box: Sandbox, steps: list[list[str]], duts: dict[str, FakeDut], main: str,
           settle_s: float) -> LoopResult:
    dut, last_seq, out = duts[main], None, ""
    for i, argv in enumerate(steps):
        if "<seq>" in argv:
            dut.say(lb.get("later", []))
            time.sleep(0.3)
            argv = [str(last_seq) if a == "<seq>" else a for a in argv]
        final = i == len(steps) - 1
        deadline = time.monotonic() + (settle_s if final else 0)
        while True:
            r = box.run_panio(argv)
            out = r.stdout
            if r.returncode != 0 and not final:
                return LoopResult(sc.id, "fail", [f"panio {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}"])
            if argv[:2] == ["serial", "watch"] and r.returncode == 0:
                time.sleep(0.3)
                for d in duts.values():
                    d.boot()
            if "--json" in argv:
                try:
                    seqs = _seqs(json.loads(out))
                    last_seq = max(seqs) if seqs else last_seq
                except ValueError:
                    pass
            if not final or _verdict(lb, out)[0] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if lb.get("port_free_after") and argv == panio_argv(lb["port_free_after"]) and not port_free(dut.path):
            return LoopResult(sc.id, "fail", [f"{dut.path} still locked after `{lb['port_free_after']}`"])
    ok, detail = _verdict(lb, out)
    return LoopResult(sc.id, "pass" if ok else "fail", detail + ([] if ok else [f"output tail: {out[-300:]!r}"]))


def port_free(path: str) -> bool:
    """True when nobody holds the port's exclusive lock (pyserial's exclusive=True uses flock)."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _verdict(lb: dict, out: str) -> tuple[bool, list[str]]:
    problems = [f"missing {e!r}" for e in lb.get("expect", []) if e not in out]
    problems += [f"unexpected {e!r}" for e in lb.get("expect_absent", []) if e in out]
    if lb.get("expect_json_seq"):
        try:
            seqs = _seqs(json.loads(out))
        except ValueError:
            seqs = []
        lo, hi = lb["expect_json_seq"]
        if not seqs or min(seqs) != lo or max(seqs) != hi:
            problems.append(f"seq range {min(seqs) if seqs else None}..{max(seqs) if seqs else None}, want {lo}..{hi}")
    return not problems, problems or ["all expected lines captured"]


def run_all(scenarios: list[Scenario], root: Path) -> list[LoopResult]:
    guard = Guard()
    return [run(sc, root / sc.id, guard) for sc in scenarios if sc.loopback]
