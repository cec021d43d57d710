"""A job whose runner died saved no serial log: the target's capture still holds it, over the job's window.

The reconciler that settles such a job (``bench_agent.jobs.reconcile.Reconciler``, ``on_lost``) keeps that
window as the job's ``serial-<iface>.log`` artifacts at once, before the capture's files rotate it away (triage
reads them too): a worker's reconciler reads the capture in its own process (``on_this_host``), the controller's
over its transport (``controller.jobs.lost_window``). A reader (a dashboard page, ``panio job status``) only ever
reads it: a GET writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bench_agent.errors import PanioError

CAPTURE_CHUNK = 5000  # lines a serial.log call returns at most
CAPTURE_MAX_LINES = 100_000  # how far back a dead runner's window is looked for

Read = Callable[[dict, dict], dict]  # (interface, serial.log's arguments) -> serial.log's reply
Window = Callable[[dict], "dict[str, str]"]  # a job -> its capture window, per interface

_log = logging.getLogger("panio.jobs")


def capture_window(job: dict, interfaces: list[dict], read: Read, tail: int | None = None) -> dict[str, str]:
    """The target's capture over the job's window (from its lease to its end, or to now), per interface, read with
    ``read``. ``tail``: only the newest lines (a running job's live view); else as far back as the window began
    (a job whose runner died saved none: the capture still holds it)."""
    since = job.get("leased_at") or job.get("started_at") or job["created_at"]
    until = job.get("finished_at") if job["state"] == "done" else None
    out = {}
    for iface in interfaces:
        try:
            lines = _capture_lines(lambda args, iface=dict(iface): read(iface, args), since, tail)
        except PanioError as err:
            out[iface["name"]] = f"(serial log unavailable: {err.message})\n"
            continue
        window = [item for item in _window(lines, since) if until is None or _when(item) <= until]
        if window or tail:
            out[iface["name"]] = "".join(_line(item) for item in window)
    return out


def keep(store, job: dict, logs: dict[str, str]) -> None:
    """Keep what the capture held over a finished job's window as the job's serial artifacts (what its runner
    would have saved had it lived)."""
    for iface, text in logs.items():
        if text and not text.startswith("(serial log unavailable"):
            store.add_artifact(job["id"], f"serial-{iface}.log", text)


def keeper(store, window: Window) -> Callable[[int], None]:
    """A reconciler's ``on_lost``: keep the capture window (``window(job)``) of a job it settled as lost."""

    def on_lost(job_id: int) -> None:
        if any(n.startswith("serial-") and n.endswith(".log") for n in store.list_artifacts(job_id)):
            return  # its runner saved some before it died
        # The job is settled already, whatever happens here: a window not kept stays on the capture, and the
        # job's serial page reads it there. A lab or host out of reach says so at INFO (a reader's
        # `panio job status` keeps its stderr clean); anything else is a warning.
        try:
            job = store.job(job_id)
            keep(store, job, window(job))
        except PanioError as err:
            _log.info("job %s: its serial window was not kept: %s", job_id, err.message)
        except Exception as exc:  # noqa: BLE001 - see above
            _log.warning("job %s: its serial window was not kept: %s: %s", job_id, type(exc).__name__, exc)

    return on_lost


def on_this_host(config) -> Window:
    """The window of a job on one of this host's targets (``config``: its ``HostConfig``), read from the capture
    in this process, in the job's lab: a worker's reconciler."""

    def window(job: dict) -> dict[str, str]:
        from bench_agent import ops
        from bench_agent.paths import LAB_ARG

        lab = (job.get("spec") or {}).get("lab_key")

        def read(iface: dict, args: dict) -> dict:
            return ops.call("serial.log", {"target": job["target"], "iface": iface, **args,
                                           **({LAB_ARG: lab} if lab else {})})

        return capture_window(job, config.target(job["target"]).get("serial", []), read)

    return window


def _capture_lines(call: Callable[[dict], Any], since: float, tail: int | None) -> list[dict]:
    """The capture's newest lines (``tail``), or back in chunks until a line older than ``since``."""
    lines = call({"tail": tail or CAPTURE_CHUNK})["lines"]
    while not tail and len(lines) < CAPTURE_MAX_LINES:
        oldest = next((item for item in lines if "seq" in item), None)
        if oldest is None or _when(oldest) < since or oldest["seq"] == 0:
            break
        older = call({"first": max(0, oldest["seq"] - CAPTURE_CHUNK), "last": oldest["seq"] - 1})["lines"]
        if not older:
            break
        lines = older + lines
    return lines


def _window(lines: list[dict], since: float) -> list[dict]:
    """Lines from the job's start: the first one that began after it, and the line before, which may have
    been the unterminated prompt the job's first command was typed into (as the saved window does)."""
    first = next((i for i, item in enumerate(lines) if _when(item) >= since), len(lines))
    return lines[max(0, first - 1):]


def _when(item: dict) -> float:
    return datetime.fromisoformat(item["time"]).timestamp()


def _line(item: dict) -> str:
    from bench_agent.serial.lines import format_entry

    return format_entry(item) + "\n"
