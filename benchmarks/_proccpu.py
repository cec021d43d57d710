"""What a harness's processes spend in CPU time, by kind, from /proc/PID/stat (utime + stime, fields 14-15).

A ``Tracker`` scans /proc every ``every_s`` seconds in a thread of its own and keeps, for every process it
has seen (a pid with its start time), the last CPU time it read: a process that ends between two marks still
counts up to its last scan, and one that starts between them counts from zero. ``mark()`` scans at once and
returns a copy; ``spent(a, b)`` is each kind's CPU seconds between two marks.

What it classifies: the processes whose command line names the run's folder (``procmem.kind_of``: simulated
boards, capture supervisors), the processes the harness started itself (``pids()``: workers, scheduler,
dashboard, Redis; their reaped children, fields 16-17, apart: ``CHILDREN``), and, for a PostgreSQL results database, the
server's backends whose command line names that database (``postgres: ... USER DB HOST ...``). A backend
that starts and ends between two scans (a new process's one connection) is missed: a lower bound.
(The leading underscore keeps `make bench` from running this module as a benchmark: scale.py uses it.)
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

import procmem

TICK = os.sysconf("SC_CLK_TCK")
CHILDREN = {"worker": "hooks"}  # the kind a started process's reaped children count to (else its own)


def stat_cpu(pid: int) -> tuple[int, float, float] | None:
    """(start time in ticks, own CPU s, reaped children's CPU s) of ``pid``; None: gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2:].split()  # f[0] is field 3 (state): field n is f[n - 3]
    return int(f[19]), (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


def cmdline(pid: int) -> str:
    try:
        return " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0"))
    except OSError:
        return ""


class Tracker:
    """CPU seconds by kind of the processes of a run under ``folder`` (see the module's docstring)."""

    def __init__(self, folder: str, pids: Callable[[], dict[int, str]], pg_database: str | None = None,
                 every_s: float = 2.0) -> None:
        self.folder, self.pids, self.pg_database, self.every_s = folder, pids, pg_database, every_s
        self.kind: dict[int, tuple[int, str | None]] = {}  # pid -> (start time, kind or None: not ours)
        self.last: dict[tuple[int, int], tuple[str, float]] = {}  # (pid, start) -> (kind, CPU s last read)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="proccpu", daemon=True)

    def start(self) -> Tracker:
        self.scan()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stopping.wait(self.every_s):
            self.scan()

    def _classify(self, pid: int, own: dict[int, str]) -> str | None:
        if pid in own:
            return own[pid]
        line = cmdline(pid)
        if self.folder in line:
            return procmem.kind_of(line)
        if self.pg_database and line.startswith("postgres:") and f" {self.pg_database} " in f"{line} ":
            return "results_db"
        return None

    def scan(self) -> dict[str, int]:
        """Read every process once; return how many of each kind are alive."""
        own = self.pids()
        alive: dict[str, int] = {}
        with self.lock:
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                pid = int(entry.name)
                got = stat_cpu(pid)
                if got is None:
                    continue
                start, cpu, children = got
                known = self.kind.get(pid)
                if known is None or known[0] != start or (known[1] is None and pid in own):
                    known = self.kind[pid] = (start, self._classify(pid, own))
                kind = known[1]
                if kind is None:
                    continue
                self.last[(pid, start)] = (kind, cpu)
                if pid in own:  # its reaped children: a worker's are its jobs' power hooks (its captures live on)
                    self.last[(pid, start, "children")] = (CHILDREN.get(kind, kind), children)
                alive[kind] = alive.get(kind, 0) + 1
        return alive

    def mark(self) -> dict:
        alive = self.scan()
        with self.lock:
            return {"at": time.time(), "cpu": dict(self.last), "alive": alive}


def spent(a: dict, b: dict) -> dict[str, float]:
    """Each kind's CPU seconds from mark ``a`` to mark ``b``."""
    out: dict[str, float] = {}
    for key, (kind, cpu) in b["cpu"].items():
        before = a["cpu"].get(key, (kind, 0.0))[1]
        out[kind] = out.get(kind, 0.0) + max(0.0, cpu - before)
    return out
