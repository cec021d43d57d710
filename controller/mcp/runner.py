"""Run one panio command as a child process: stdin closed, stdout and stderr captured, bounded in time.

The child is ``python -m controller.cli.main --lab LAB ...`` with this
interpreter, so the server and its children are always the same panio. It
gets its own process group: at the deadline, or when the client cancels the
call, it, its group and its descendants get SIGTERM, then SIGKILL, so a hook
the command started cannot outlive the call. Nothing the child prints reaches the server's
stdout, which is the MCP protocol stream.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

MAX_CAPTURE_BYTES = 16 << 20  # serial_wait may return up to 8 MiB of JSON; leave room for escaping
DRAIN_GRACE_S = 1.0  # after the child exits, how long a grandchild holding its pipes may delay the result
TERM_GRACE_S = 2.0


@dataclass
class Finished:
    argv: list[str]  # what ran after ``--lab LAB`` (for messages)
    code: int | None  # None: stopped at the deadline or on cancel
    out: str
    err: str
    elapsed_s: float
    deadline_s: float
    truncated: bool = False

    @property
    def timed_out(self) -> bool:
        return self.code is None


def child_argv(lab: Path, argv: list[str]) -> list[str]:
    # -P: no current directory on sys.path, so a project's own `controller` package cannot shadow panio's.
    return [sys.executable, "-P", "-m", "controller.cli.main", "--lab", str(lab), *argv]


async def run(lab: Path, argv: list[str], deadline_s: float) -> Finished:
    """Run ``panio --lab LAB *argv``; never longer than ``deadline_s`` (then code is None)."""
    started = time.monotonic()
    proc = await anyio.open_process(child_argv(lab, argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
    out, err = bytearray(), bytearray()
    stopped = False
    try:
        async with anyio.create_task_group() as tg:
            drained = [anyio.Event(), anyio.Event()]
            tg.start_soon(_drain, proc.stdout, out, drained[0])
            tg.start_soon(_drain, proc.stderr, err, drained[1])
            with anyio.move_on_after(deadline_s):
                await proc.wait()
            if proc.returncode is None:
                stopped = True
                await _stop(proc)
            with anyio.move_on_after(DRAIN_GRACE_S):
                for event in drained:
                    await event.wait()
            tg.cancel_scope.cancel()
    finally:
        if proc.returncode is None:  # the client cancelled the call: still never leave the child behind
            with anyio.CancelScope(shield=True):
                await _stop(proc)
    return Finished(argv=argv, code=None if stopped else proc.returncode, out=_text(out), err=_text(err),
                    elapsed_s=time.monotonic() - started, deadline_s=deadline_s,
                    truncated=len(out) >= MAX_CAPTURE_BYTES or len(err) >= MAX_CAPTURE_BYTES)


async def _drain(stream, into: bytearray, done: anyio.Event) -> None:
    try:
        async for chunk in stream:
            if len(into) < MAX_CAPTURE_BYTES:
                into += chunk[: MAX_CAPTURE_BYTES - len(into)]
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


async def _stop(proc) -> None:
    """SIGTERM the child, its process group and its descendants; SIGKILL whatever is left after a grace period.

    Descendants are found through /proc as well, because panio runs hooks in
    sessions of their own (so it can kill them at their timeout): once the
    child is gone, nothing else would stop them.
    """
    family = _descendants(proc.pid)
    _signal(proc.pid, family, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE_S):
        await proc.wait()
    if proc.returncode is None:
        _signal(proc.pid, family + _descendants(proc.pid), signal.SIGKILL)
        await proc.wait()
    else:  # the child is reaped: its pid (and group id) may be reused, so only the recorded family
        _signal(None, family, signal.SIGKILL)


def _signal(pgid: int | None, family: list[tuple[int, int]], sig: int) -> None:
    """Signal the group, then each (pid, start time) of ``family`` that is still that same process."""
    try:
        if pgid is not None:
            os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid, started in family:
        if _stat(pid)[1] != started:  # gone, or the pid now belongs to someone else
            continue
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stat(pid: int | str) -> tuple[int, int]:
    """(parent pid, start time in clock ticks) from /proc; (-1, -1) when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return -1, -1


def _descendants(root: int) -> list[tuple[int, int]]:
    """Every live descendant of ``root`` as (pid, start time) (Linux /proc; elsewhere the group has to do)."""
    children: dict[int, list[tuple[int, int]]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        ppid, started = _stat(entry)
        children.setdefault(ppid, []).append((int(entry), started))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _text(data: bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")
