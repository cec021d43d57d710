"""Run one panio command as a child process for the MCP server: stdin closed, output captured, bounded in time.

The child is ``python -P -m controller.cli.main --lab LAB ...`` with this
interpreter, so the server and its children are always the same panio. It is
a ``bench_agent.process.Child``: at the deadline, or when the client cancels
the call, it, its group and its descendants get SIGTERM, then SIGKILL, so a
hook the command started cannot outlive the call. Nothing the child prints
reaches the server's stdout, which is the MCP protocol stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench_agent.process import Child, panio_argv

MAX_CAPTURE_BYTES = 16 << 20  # serial_wait may return up to 8 MiB of JSON; leave room for escaping
POLL_S = 0.02


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
    return [*panio_argv(), "--lab", str(lab), *argv]


async def run(lab: Path, argv: list[str], deadline_s: float) -> Finished:
    """Run ``panio --lab LAB *argv``; never longer than ``deadline_s`` (then code is None)."""
    started = time.monotonic()
    child = Child(child_argv(lab, argv), limit_bytes=MAX_CAPTURE_BYTES)
    try:
        with anyio.move_on_after(deadline_s):
            while child.poll() is None:
                await anyio.sleep(POLL_S)
    finally:
        stopped = child.poll() is None  # the deadline, or the client cancelled the call
        if stopped:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(child.stop)
    done = await anyio.to_thread.run_sync(child.finished, "timeout" if stopped else None)
    return Finished(argv=argv, code=done.code, out=done.out, err=done.err, elapsed_s=time.monotonic() - started,
                    deadline_s=deadline_s, truncated=done.truncated)
