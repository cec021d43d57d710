"""The controller's side of device health: what a job's payload carries, and running a health check now.

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
            "lease_wait_s": 300, "lease_ttl_s": 30, "kind": "health_check",
            "notify": list(lab.data.get("notify", [])), "retry_s": check["retry_s"],
            "retry_max_s": check["retry_max_s"], **({"auto": True} if auto else {})}


def run_check(lab: Lab, target: str, progress, auto: bool = False, by: str = "panio target health") -> dict:
    """Run ``target``'s health check now and wait for it (in this process, or on its worker with a broker);
    the check's verdict sets the target's health. Returns the check's job."""
    from controller.jobs import backends

    payload = check_payload(lab, target, auto)
    store = backends.results_store()
    host = lab.target(target).get("host")
    if backends.broker_url():
        from controller.jobs import remote

        payload["via"] = "broker"
        payload["job_id"] = store.create_job(payload["name"], target, host, payload)
        remote.publish(remote.celery_app(), store, payload)
        return remote.follow(payload["job_id"], progress)
    from bench_agent.jobs.leases import holder_name
    from bench_agent.jobs.runner import JobRunner

    payload["job_id"] = store.create_job(payload["name"], target, host, payload)
    JobRunner(store, backends.lease_store(), holder_name(by), progress,
              caller=backends.dispatch_caller(lab), planner=spec.planner(lab)).run(payload)
    return store.job(payload["job_id"])


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


def due_rechecks(lab: Lab, store, now: float) -> list[str]:
    """The targets an automatic check made bad whose re-check is due (never maintenance, never an operator's bad)."""
    from bench_agent.jobs.health import recheck_due

    return [t for t, record in store.all().items()
            if recheck_due(record, now) and t in lab.targets and check_path(lab, t) is not None]


def recheck(lab: Lab, target: str, progress, by: str) -> dict | None:
    """The automatic re-check of a bad target (``panio schedule serve``). The lab is asked first, through the
    dispatcher: while a fault is plainly there the check is not run (nor recorded as a job): the reason says
    what to fix and the lab is asked again ``retry_s`` later. A host this process cannot reach itself is asked
    by its worker, with a broker (the runner asks the lab again before any automatic check). Returns the
    check's job, or None when it was held."""
    import time

    from bench_agent.jobs import health as h
    from bench_agent.jobs import lab_probe
    from controller.jobs import backends

    payload = check_payload(lab, target, auto=True)
    found = lab_probe.check_blockers(backends.dispatch_caller(lab)(target, None, None), target,
                                     payload["target_config"], payload["steps"])
    if backends.broker_url():
        found = [f for f in found if f["what"] != "host"]
    if found:
        h.HealthStore(backends.results_url()).postpone(target, *h.held(found, payload, time.time()))
        return None
    return run_check(lab, target, progress, auto=True, by=by)
