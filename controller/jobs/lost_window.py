"""A job whose runner died saved no serial log: the target's capture still holds it, over the job's window.

The reconciler that settles such a job (``bench_agent.jobs.reconcile.Reconciler``, ``on_lost``) keeps that
window as the job's ``serial-<iface>.log`` artifacts at once, before the capture's files rotate it away (triage
reads them too). A reader (a dashboard page, ``panio job status``) only ever reads it: a GET writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from bench_agent.errors import PanioError

_log = logging.getLogger("panio.jobs")


def keeper(store, load_lab: Callable[[], object] | None = None) -> Callable[[int], None]:
    """What a controller's reconciler does with a job it settled as lost (``on_lost``): keep its capture window.
    ``load_lab``: the lab whose hosts own the targets (None: the lab file panio finds, as the CLI does)."""

    def on_lost(job_id: int) -> None:
        job = store.job(job_id)
        if any(n.startswith("serial-") and n.endswith(".log") for n in store.list_artifacts(job_id)):
            return  # its runner saved some before it died
        # The job is settled already, whatever happens here: a window not kept stays on the capture, and the
        # job's serial page reads it there. A lab or host panio cannot reach says so at INFO (a reader's
        # `panio job status` keeps its stderr clean); anything else is a warning.
        try:
            lab = (load_lab or _default_lab)()
            keep(store, job, capture_window(lab, job))
        except PanioError as err:
            _log.info("job %s: its serial window was not kept: %s", job_id, err.message)
        except Exception as exc:  # noqa: BLE001 - see above
            _log.warning("job %s: its serial window was not kept: %s: %s", job_id, type(exc).__name__, exc)

    return on_lost


def _default_lab():
    from controller.lab.store import load
    from controller.paths import resolve_lab_path

    return load(resolve_lab_path(None)[0])


CAPTURE_CHUNK = 5000  # lines a serial.log call returns at most
CAPTURE_MAX_LINES = 100_000  # how far back a dead runner's window is looked for


def capture_window(lab, job: dict, tail: int | None = None) -> dict[str, str]:
    """The target's capture over the job's window (from its lease to its end, or to now), per interface, read from
    the host that owns the target. ``tail``: only the newest lines (a running job's live view); else as far back
    as the window began (a job whose runner died saved none: the capture still holds it)."""
    since = job.get("leased_at") or job.get("started_at") or job["created_at"]
    until = job.get("finished_at") if job["state"] == "done" else None
    out = {}
    try:
        config = lab.target(job["target"])
    except PanioError:
        return {}
    for iface in config.get("serial", []):
        try:
            lines = _capture_lines(lab, config, job["target"], dict(iface), since, tail)
        except PanioError as err:
            out[iface["name"]] = f"(serial log unavailable: {err.message})\n"
            continue
        window = [item for item in _window(lines, since) if until is None or _when(item) <= until]
        if window or tail:
            out[iface["name"]] = "".join(_line(item) for item in window)
    return out


def keep(store, job: dict, logs: dict[str, str]) -> None:
    """Keep what the capture held over a finished job's window as the job's serial artifacts (what its runner
    would have saved had it lived), before the capture's files rotate it away; triage reads them too."""
    for iface, text in logs.items():
        if text and not text.startswith("(serial log unavailable"):
            store.add_artifact(job["id"], f"serial-{iface}.log", text)


def _capture_lines(lab, config: dict, target: str, iface: dict, since: float, tail: int | None) -> list[dict]:
    """The capture's newest lines (``tail``), or back in chunks until a line older than ``since``."""
    from controller import dispatch

    def call(args: dict) -> dict:
        return dispatch.call_host(lab, config.get("host"), "serial.log", {"target": target, "iface": iface, **args})

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
