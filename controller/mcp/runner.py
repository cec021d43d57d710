"""Run one panio command as a child process: stdin closed, stdout and stderr captured, bounded in time.

The child is ``python -m controller.cli.main --lab LAB ...`` with this
interpreter, so the server and its children are always the same panio. It
gets its own process group: at the deadline, or when the client cancels the
call, the group gets SIGTERM, then SIGKILL, so a hook the command started
cannot outlive the call. Nothing the child prints reaches the server's
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
    return [sys.executable, "-m", "controller.cli.main", "--lab", str(lab), *argv]


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
    """SIGTERM the child's process group, SIGKILL it if it is still there after a grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE_S):
        await proc.wait()
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
    else:  # the leader went; take any straggler of its group with it
        _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")
