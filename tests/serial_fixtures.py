"""Helpers for serial tests: a lab with simulated boards on real PTYs, and supervisor clean-up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from bench_agent.sim.console import SimConsole
from jobhelp import wait_for, wait_gone


class Bench:
    """A lab whose target's interfaces are SimConsoles; stops every supervisor it started."""

    def __init__(self, panio, tmp: Path) -> None:
        self.panio, self.tmp = panio, tmp
        self.sims: dict[str, SimConsole] = {}
        self.state = panio.state  # the lab's: captures are kept per lab
        panio("init")

    def board(self, target: str, ifaces: tuple[str, ...] = ("console",), **sim_args) -> dict[str, SimConsole]:
        self.panio("target", "add", target)
        for name in ifaces:
            sim = SimConsole(str(self.tmp / f"{target}-{name}"), boot_s=sim_args.get("boot_s", 0.1),
                             countdown_s=sim_args.get("countdown_s", 0.2), powered=False, banner=f"{target} {name}")
            sim.start()
            self.sims[f"{target}/{name}"] = sim
            self.panio("serial", "add", name, "-t", target, "--device", sim.device)
        return {n: self.sims[f"{target}/{n}"] for n in ifaces}

    def discovery(self, target: str) -> dict | None:
        path = self.state / "daemons" / f"serial-{target}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def status(self, target: str, *flags: str) -> dict:
        r = self.panio("serial", "status", target, *flags, check=False)
        assert r.code in (0, 10), r.err  # 10: capture not running, the JSON is printed all the same
        return r.json()

    def wait_for(self, target: str, pattern: str, *flags: str, since: int = 0, timeout_ms: int = 60000) -> dict:
        epoch = self.status(target, *flags)["epoch"]
        return self.panio("serial", "wait", target, "--epoch", str(epoch), "--since", str(since), "--pattern", pattern,
                          "--timeout-ms", str(timeout_ms), "--max-bytes", "1048576", *flags).json()

    def close(self) -> None:
        for path in (self.state / "daemons").glob("serial-*.json") if (self.state / "daemons").exists() else []:
            kill_and_reap(json.loads(path.read_text())["pid"])
        for pid in supervisor_pids(self.state):
            kill_and_reap(pid)
        for sim in self.sims.values():
            sim.close()


def processes() -> Iterator[tuple[int, bytes]]:
    """(pid, command line with NUL-separated words) of every process still there when read."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            yield int(pid), Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue


def supervisor_pids(state: Path) -> list[int]:
    """The capture supervisors of state directory ``state``, or of any lab's under it (``state/labs/KEY``)."""
    own, labs = str(state).encode(), f"{state}/labs/".encode()
    return [pid for pid, cmdline in processes()
            if b"bench_agent.serial.supervisor" in (argv := cmdline.split(b"\0"))
            and any(a == own or (a.startswith(labs) and b"/" not in a[len(labs):]) for a in argv)]


def lab_state(state: Path) -> Path:
    """The one lab's state directory under ``state`` (a host side that one lab reached), else ``state``."""
    labs = sorted((state / "labs").iterdir()) if (state / "labs").is_dir() else []
    assert len(labs) <= 1, f"more than one lab under {state}: {labs}"
    return labs[0] if labs else state


def supervisor_connections(state: Path, target: str) -> set[str]:
    """The clients connected to ``target``'s capture supervisor right now: the inodes of the connections its
    control socket accepted (/proc/net/unix names them by the socket's path, state 03, connected)."""
    sock = json.loads((lab_state(state) / "daemons" / f"serial-{target}.json").read_text())["socket"]
    rows = (line.split() for line in Path("/proc/net/unix").read_text().splitlines()[1:])
    return {row[6] for row in rows if len(row) == 8 and row[7] == sock and row[5] == "03"}


def kill_and_reap(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it is gone (a zombie left for its own parent to reap counts as gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_gone(pid)


def at_shell_after_plug(panio, target: str) -> None:
    """Get a board just plugged in (``plug_console``) to its shell prompt (``sim.console.to_shell``: it may still
    be counting down its 0.05 s, and the transact's newline then stops it in U-Boot)."""
    from bench_agent.sim.console import to_shell

    to_shell(lambda text, until: panio("serial", "transact", target, text, "--until", until,
                                       "--timeout-ms", "10000").out)


def plug_console(link: Path) -> subprocess.Popen:
    """A simulated board in a process of its own, its console at ``link`` (a USB adapter being plugged in:
    terminate the process to unplug it)."""
    proc = subprocess.Popen([sys.executable, "-m", "bench_agent.sim.console", "--link", str(link),
                             "--boot-s", "0.05", "--countdown-s", "0.05"])
    try:
        wait_for(lambda: link.exists() or proc.poll() is not None, timeout_s=60, every_s=0.02)
        assert link.exists(), f"the simulated board exited {proc.returncode} before its console appeared"
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc

