"""The controller's side of device health: what a job's payload carries, and a standalone check's payload.

A target's ``health_check`` (lab file) names a job file, relative to the lab
file. It is compiled when a job for the target is created, so a broken check
is refused before anything is queued, and the payload carries it to the
worker (which has no lab file), with the lab's ``[[notify]]`` channels.
"""

from __future__ import annotations

from pathlib import Path

from bench_agent.errors import NotConfigured
from controller.jobs import spec
from controller.lab.model import Lab

_COMPILED: dict[tuple[str, int], dict] = {}
ON_UNHEALTHY = ("wait", "skip")


def check_path(lab: Lab, target: str) -> Path | None:
    check = lab.target(target).get("health_check")
    if not check:
        return None
    return (Path(lab.path).parent / check["job"]).resolve()


def compiled_check(lab: Lab, target: str) -> dict | None:
    """The target's health-check job as a payload fragment (name, steps, timeout_s, every_s), or None."""
    path = check_path(lab, target)
    if path is None:
        return None
    key = (str(path), path.stat().st_mtime_ns if path.exists() else 0)
    if key not in _COMPILED:
        job = spec.load(path)
        _COMPILED[key] = {"name": job["data"]["name"], "steps": spec.compile_steps(job),
                          "timeout_s": job["data"].get("timeout_s"), "file": str(path)}
    table = lab.target(target)["health_check"]
    return {**_COMPILED[key], **{k: table.get(k) for k in ("every_s", "retry_s", "retry_max_s")}}


def extras(lab: Lab, target: str, on_unhealthy: str | None) -> dict:
    """What every job payload for ``target`` carries about health and notifications."""
    out: dict = {"notify": list(lab.data.get("notify", [])), "on_unhealthy": on_unhealthy or "wait"}
    check = compiled_check(lab, target)
    if check:
        out["health_check"] = {**check, "steps": spec.plan_steps(check["steps"], lab, target)}
    return out


def check_payload(lab: Lab, target: str, auto: bool = False) -> dict:
    """A standalone health-check job for ``target`` (``panio target health T --check``; ``auto``: the
    scheduler's re-check of a bad target, which the runner holds while the lab is at fault)."""
    check = compiled_check(lab, target)
    if check is None:
        raise NotConfigured(f"target {target!r} names no health-check job",
                            hint=f"add `[targets.{target}.health_check]` with `job = \"checks/{target}.toml\"` "
                                 "to the lab file (docs/operations.md)", target=target)
    return {"name": check["name"], "target": target, "steps": spec.plan_steps(check["steps"], lab, target),
            "target_config": dict(lab.target(target)), "timeout_s": check["timeout_s"],
            "lease_wait_s": 300, "lease_ttl_s": 30, "kind": "health_check", "lab_key": lab.key,
            "notify": list(lab.data.get("notify", [])), "retry_s": check["retry_s"],
            "retry_max_s": check["retry_max_s"], **({"auto": True} if auto else {})}


def operator_set(lab: Lab, store, target: str, health: str, reason: str | None, by: str,
                 skip_check: bool = False) -> tuple[str, dict, bool]:
    """An operator sets ``target``'s health (CLI or dashboard): (previous, record, run the check now?).

    Lifting maintenance on a target that names a health check sets ``unknown`` instead
    of ``good``: the check decides (run now by the CLI; before the next job otherwise).
    A change notifies like any other.
    """
    from bench_agent.jobs import notify

    lab.target(target)  # fails helpfully if the target is unknown
    before = store.get(target)["health"]
    has_check = check_path(lab, target) is not None
    lifting = before == "maintenance" and health in ("good", "unknown")
    to = "unknown" if lifting and has_check and not skip_check else health
    reason = reason or ("maintenance lifted" if lifting else "")  # describe() says "no reason given, set by WHO"
    previous, record = store.set(target, to, reason, by)
    if previous != to:
        notify.send(lab.data.get("notify"), "health_changed",
                    {"target": target, "previous": previous, "health": to, "reason": reason,
                     "set_by": record["set_by"], "job_id": None})
    return previous, record, lifting and has_check and not skip_check
