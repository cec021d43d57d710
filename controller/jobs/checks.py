"""Running a target's health check now: by an operator (``panio target health T --check``) or on its own
(``panio schedule serve`` re-checks a board an automatic check made bad, with backoff, and one a job lost with
its worker left unknown).

It runs where ``panio job run`` would run it: in this process with no broker, else on the target's worker.
"""

from __future__ import annotations

from controller import backends
from controller.jobs import health, local, spec
from controller.lab.model import Lab


def run_check(lab: Lab, target: str, progress, auto: bool = False, by: str = "panio target health") -> dict:
    """Run ``target``'s health check now and wait for it; the check's verdict sets the target's health.
    Returns the check's job."""
    payload = health.check_payload(lab, target, auto)
    store = backends.results_store()
    host = lab.target(target).get("host")
    if backends.broker_url():
        from controller.jobs import remote

        payload["via"] = "broker"
        payload["target_config"] = spec.target_config(lab, target, for_worker=True)
        payload["job_id"] = store.create_job(payload["name"], target, host, payload)
        remote.publish(backends.celery_app(), store, payload)
        return remote.follow(payload["job_id"], progress)
    from bench_agent.leases.base import holder_name
    from bench_agent.jobs.runner import JobRunner

    payload["job_id"] = store.create_job(payload["name"], target, host, payload)
    JobRunner(store, backends.lease_store(lab.key), holder_name(by), progress,
              caller=local.dispatch_caller(lab), planner=spec.planner(lab)).run(payload)
    return store.job(payload["job_id"])


def due_rechecks(lab: Lab, store, now: float) -> list[str]:
    """The targets whose automatic re-check is due: made bad by an automatic check, or left unknown by a job lost
    with its worker (never maintenance, never an operator's bad)."""
    from bench_agent.health.state import recheck_due

    return [t for t, record in store.all().items()
            if recheck_due(record, now) and t in lab.targets and health.check_path(lab, t) is not None]


def recheck(lab: Lab, target: str, progress, by: str) -> dict | None:
    """The automatic re-check of a bad target (``panio schedule serve``). The lab is asked first, through the
    dispatcher: while a fault is plainly there the check is not run (nor recorded as a job): the reason says
    what to fix and the lab is asked again ``retry_s`` later. A host this process cannot reach itself is asked
    by its worker, with a broker (the runner asks the lab again before any automatic check). Returns the
    check's job, or None when it was held."""
    import time

    from bench_agent.health import state as h
    from bench_agent.jobs import lab_probe

    payload = health.check_payload(lab, target, auto=True)
    found = lab_probe.check_blockers(local.dispatch_caller(lab)(target, None, None), target,
                                     payload["target_config"], payload["steps"])
    if backends.broker_url():
        found = [f for f in found if f["what"] != "host"]
    store = h.HealthStore(backends.results_url())
    if found:
        store.postpone(target, *h.held(found, payload, time.time()))
        return None
    if not store.claim_recheck(target, time.time()):  # one re-check at a time per target: a job's runner took it
        return None
    return run_check(lab, target, progress, auto=True, by=by)
