"""Retention: old jobs, their steps and artifacts leave the results database; stale per-job files leave the disk.

By hand: ``panio job prune --older-than 30d [--artifacts-only] [--dry-run]``.
Automatically: the lab file's ``[retention]`` table::

    [retention]
    jobs = "90d"        # finished jobs older than this go, with their steps and artifacts (and health history)
    artifacts = "14d"   # artifacts (serial logs of the job's window...) of older jobs go; the job stays

applied by ``panio schedule serve`` (at start and after every run it fires)
and by ``panio job run`` / ``panio suite run`` before they run, at most once an
hour per state directory (the stamp ``STATE_DIR/retention.json`` records
when, and what went). A failure of automatic retention never fails the job
that triggered it: the stamp records the error and the next run tries again.

Only finished jobs are ever removed (``state = done``), judged by when they
finished; operator overrides (``controller.jobs.overrides``) older than the horizon
go with them, and so do device-health history events (``panio_health_events``,
counted as ``health_events``) except each target's newest, which says why it is
in its current health; current health itself is never touched. ``--artifacts-only``
and ``artifacts = ...`` leave overrides and health history alone.

Files: a lab-parse cache (``STATE_DIR/cache/lab-*.marshal``) whose
lab file no longer exists is removed, as are the per-job lab files an older
panio's workers wrote (``STATE_DIR/worker-*/labs/job-*.toml``; workers write
none now: steps run in the worker's process) once the worker that wrote one is
gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from typing import Any

from bench_agent.errors import PanioError, UsageError

AUTO_EVERY_S = 3600.0
STAMP = "retention.json"


def parse_duration(text: str, option: str = "--older-than") -> float:
    """``30d``, ``12h``, ``90m``, ``45s`` in seconds (the units of `schedule add --every`)."""
    from controller.jobs.schedules import DURATION_RE, UNITS_S

    m = DURATION_RE.match(str(text).strip())
    if m and float(m.group(1)) <= 0:  # `0d` has a number and a unit: say what is wrong with it
        raise UsageError(f"{option} {text!r}: must be more than zero, e.g. 30d, 12h, 90m, 45s", argument=option)
    if not m:
        raise UsageError(f"{option} {text!r}: use a number and a unit, e.g. 30d, 12h, 90m, 45s", argument=option)
    return float(m.group(1)) * UNITS_S[m.group(2)]


def prune(store, older_than_s: float, artifacts_only: bool = False, dry_run: bool = False) -> dict[str, Any]:
    """Remove finished jobs (or only their artifacts) older than ``older_than_s``, and unless ``artifacts_only``
    overrides and health history as old; the counts of what went."""
    before = time.time() - older_than_s
    counts = store.prune(before, artifacts_only=artifacts_only, dry_run=dry_run)
    if not artifacts_only:
        from bench_agent.health.state import HealthStore
        from controller.jobs.overrides import OverrideStore

        counts["overrides"] = OverrideStore(store.url).prune(before, dry_run=dry_run)
        counts["health_events"] = HealthStore(store.url).prune(before, dry_run=dry_run)
    files = [] if artifacts_only else sweep_files(dry_run=dry_run)
    return {"older_than_s": older_than_s, "before": before, "artifacts_only": artifacts_only, "dry_run": dry_run,
            **counts, "files": files}


_OLD_LAB_RE = re.compile(r"job-\d+-(\d+)-[0-9a-f]{8}\.toml$")


def sweep_files(dry_run: bool = False) -> list[str]:
    """Lab-parse caches of lab files that no longer exist, and per-job lab files of dead workers."""
    from bench_agent.paths import lab_cache_source, state_dir

    state = state_dir()
    stale = {str(p) for p in sorted(state.glob("worker-*/labs/job-*.toml")) if _writer_gone(p.name)}
    gone = sorted(stale)
    for cache in sorted((state / "cache").glob("lab-*.marshal")):
        source = lab_cache_source(cache)
        if source is not None and (source in stale or not os.path.exists(source)):
            gone.append(str(cache))
    if not dry_run:
        for path in gone:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return gone


def _writer_gone(name: str) -> bool:
    """Whether the worker that wrote a per-job lab file (its pid is in the name) is gone."""
    from bench_agent.process import pid_alive

    m = _OLD_LAB_RE.match(name)
    return m is None or not pid_alive(int(m.group(1)))


def settings(lab) -> dict[str, float]:
    """The lab's ``[retention]`` as seconds: ``{"jobs": ..., "artifacts": ...}`` (absent keys left out)."""
    table = (lab.data.get("retention") or {}) if lab is not None else {}
    return {k: parse_duration(v, f"[retention] {k}") for k, v in table.items()}


def apply(lab, store, dry_run: bool = False) -> dict[str, Any]:
    """The lab's retention, now: artifacts first (the shorter horizon), then jobs."""
    rules = settings(lab)
    out: dict[str, Any] = {"rules": {k: v for k, v in (lab.data.get("retention") or {}).items()}}
    if "artifacts" in rules:
        out["artifacts"] = prune(store, rules["artifacts"], artifacts_only=True, dry_run=dry_run)
    if "jobs" in rules:
        out["jobs"] = prune(store, rules["jobs"], dry_run=dry_run)
    return out


def auto(lab, store=None, now: float | None = None) -> dict[str, Any] | None:
    """Apply the lab's retention if it has one and it last ran over an hour ago; None when not due."""
    if lab is None or not lab.data.get("retention"):
        return None
    from bench_agent.paths import state_dir

    now = time.time() if now is None else now
    stamp = state_dir() / STAMP
    try:
        last = json.loads(stamp.read_text(encoding="utf-8")).get("at", 0)
    except (OSError, ValueError):
        last = 0
    if now - last < AUTO_EVERY_S:
        return None
    record: dict[str, Any] = {"at": now}
    try:
        if store is None:
            from controller import backends

            store = backends.results_store()
        record["result"] = apply(lab, store)
    except PanioError as err:  # recorded, never raised: retention must not fail the job that triggered it
        record["error"] = err.to_json()
    except Exception as exc:  # noqa: BLE001 - a database error mid-prune, likewise (documented above)
        record["error"] = {"error": "internal", "message": f"{type(exc).__name__}: {exc}"}
    from bench_agent.private import state_dir as private_state_dir

    private_state_dir()
    tmp = stamp.with_name(f".{STAMP}.{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    os.replace(tmp, stamp)
    return record
