"""Who started a daemon, as its discovery file records it (``started_by``).

A capture is started by a command (``panio serial watch`` by hand, over SSH, or
carried by a worker's ``panio.op`` queue: ``{"kind": "command", "pid": N}``) or
by a step of a job a worker runs (``{"kind": "worker", "pid": WORKER, "job":
ID}``). A worker that stops stops only the captures its own jobs started
(``bench_agent.daemons.registry.stop_captures_of``), and leaves an operator's
running though they share its state directory.

The job's thread says so with ``for_job(job_id)``; a ContextVar, so the pool's
other threads (a ``panio.op`` an operator sent meanwhile) stay commands.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Any

WORKER, COMMAND = "worker", "command"

_CURRENT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("panio_starter", default=None)


def current() -> dict[str, Any]:
    """Who is starting a daemon from this thread now."""
    return _CURRENT.get() or {"kind": COMMAND, "pid": os.getpid()}


@contextlib.contextmanager
def for_job(job_id: Any) -> Iterator[None]:
    """Daemons started meanwhile in this context are this worker's, for job ``job_id``."""
    token = _CURRENT.set({"kind": WORKER, "pid": os.getpid(), "job": job_id})
    try:
        yield
    finally:
        _CURRENT.reset(token)


def a_workers(started_by: Any, worker_pid: int) -> bool:
    """Whether a daemon ``started_by`` so is worker ``worker_pid``'s to stop: one of its jobs started it, or a job
    of a worker that is gone (left running, it would hold the port with nobody to read it). A daemon that records
    no starter (started by an older panio) is nobody's: it is left running."""
    from bench_agent.procinfo import pid_alive

    if not isinstance(started_by, dict) or started_by.get("kind") != WORKER:
        return False
    pid = started_by.get("pid")
    return pid == worker_pid or (isinstance(pid, int) and not pid_alive(pid))
