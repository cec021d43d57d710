"""Run one panio command for the MCP server, in the server's own process: no child ``panio`` per call.

A tool call is the command line ``panio --lab LAB ...`` run through the CLI's
own road: ``panio mcp`` hands the server ``controller.cli.main.run_captured``
(parse, the command's plan, its body in ``bench_agent.commands``, errors
reported as the CLI reports them), so its text and exit status are exactly
the CLI's. The front end does not import the CLI (tests/test_imports.py): the
CLI passes its road in. What a call prints is captured, never written to the
server's stdout, which is the protocol stream.

It runs the way a job step runs (``bench_agent.jobs.steps.execute``): in a
thread of its own, inside a process scope, until it ends, its deadline
passes, or the client cancels the call. Then every process it started (a
hook, a helper, an action) gets SIGTERM, then SIGKILL, and the call returns
at once; the command's thread is left to end on its own bounded wait. A
failure of any kind is the call's error result, never the server's end.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import anyio

from bench_agent.commands import Output

Command = Callable[[list[str], Output], int]  # (panio's argv, where its text goes) -> exit status

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
    error: dict | None = None  # the error the command raised, as its JSON line says it (None: it raised none)

    @property
    def timed_out(self) -> bool:
        return self.code is None


class Capture(Output):
    """A command's stdout and stderr, kept apart (a tool's result is stdout; stderr holds notes and the
    error lines), up to ``limit_bytes`` together."""

    def __init__(self, limit_bytes: int = MAX_CAPTURE_BYTES) -> None:
        self.streams = {"stdout": bytearray(), "stderr": bytearray()}
        self.limit_bytes, self.truncated = limit_bytes, False
        self.error_json: dict | None = None  # the error the command raised (``error``), as an object
        self._lock = threading.Lock()  # a stopped command's thread may still be writing

    def write(self, stream: str, data: str | bytes) -> None:
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        with self._lock:
            room = self.limit_bytes - sum(map(len, self.streams.values()))
            if len(raw) > room:
                raw, self.truncated = raw[:max(room, 0)], True
            self.streams["stderr" if stream == "stderr" else "stdout"] += raw

    def error(self, err) -> None:
        """The error the command raised, reported as the CLI reports it (``controller.cli.main.report``) and kept as
        an object: the tool's result reads it there (whether the outcome is unknown, as the dispatcher marked it),
        never from the text on stderr."""
        import json

        self.error_json = err.to_json()
        self.write("stderr", err.human() + "\n" + json.dumps(self.error_json, sort_keys=False) + "\n")

    def text(self, stream: str) -> str:
        with self._lock:
            return bytes(self.streams[stream]).decode("utf-8", "replace")


def run_here(command: Command, lab: Path, argv: list[str], deadline_s: float,
             should_stop=lambda: None) -> tuple[int | None, Capture]:
    """Run ``panio --lab LAB *argv`` through ``command`` in this process, bounded by ``deadline_s`` and
    ``should_stop``; blocks. (exit status, or None when stopped; what it printed)."""
    from bench_agent.jobs.steps import execute
    from controller import dispatch

    capture = Capture()
    status: dict[str, int] = {}

    def body() -> None:
        status["code"] = command(["--lab", str(lab), *argv], capture)

    try:
        _, why = execute(body, capture, deadline_s, should_stop)
    finally:
        dispatch.close_current()  # its connections (SSH) are this call's; a stopped call's pending wait ends
    return (None if why is not None else status.get("code", 70)), capture


async def run(command: Command, lab: Path, argv: list[str], deadline_s: float) -> Finished:
    """Run ``panio --lab LAB *argv`` through ``command``; never longer than ``deadline_s`` (then code is
    None). A cancelled call stops the command and what it started before the cancellation goes on."""
    started = time.monotonic()
    cancelled = threading.Event()
    box: dict[str, tuple[int | None, Capture]] = {}

    def work() -> None:
        try:
            box["done"] = run_here(command, lab, argv, deadline_s,
                                   lambda: "cancelled" if cancelled.is_set() else None)
        except Exception as exc:  # noqa: BLE001 - a bug in the call is the call's error, never the server's end
            from bench_agent.errors import InternalError

            capture = Capture()
            capture.error(InternalError(f"internal error: {type(exc).__name__}: {exc}",
                                        hint="this is a bug in panio; the server's log has the traceback"))
            import logging

            logging.getLogger("panio.mcp").exception("tool call failed")
            box["done"] = (70, capture)

    thread = threading.Thread(target=work, name="panio-mcp-call", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            await anyio.sleep(POLL_S)
    finally:
        if thread.is_alive():  # the client cancelled the call: stop it (within a poll of execute) and its children
            cancelled.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join)
    code, capture = box["done"]
    return Finished(argv=argv, code=code, out=capture.text("stdout"), err=capture.text("stderr"),
                    elapsed_s=time.monotonic() - started, deadline_s=deadline_s, truncated=capture.truncated,
                    error=capture.error_json)
