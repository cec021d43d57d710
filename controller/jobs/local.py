"""The embedded default: run a job now, in this process, with no broker and no server.

The same ``bench_agent.jobs.runner.JobRunner`` a Celery worker uses runs here;
leases are file locks in the state directory (or Redis when configured) and
results go to the same database ``panio job status`` reads.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench_agent.errors import Canceled
from bench_agent.leases.base import holder_name
from controller import backends
from controller.jobs import spec
from controller.lab.model import Lab


def create(store, lab: Lab, job: dict, steps: list[dict], target: str, deadline_at: float | None = None,
           for_worker: bool = False, on_unhealthy: str | None = None) -> dict:
    """Record a queued job and return its payload: its steps planned for ``target`` and the target's
    configuration (the runner reads its serial interfaces and power from it). ``for_worker``: it goes to a
    host's queue (published right after: it counts as sent), so a reconciler may send it again, and the worker
    reads the target's configuration from its own lab file (``spec.target_config``)."""
    return create_many(store, lab, [(job, steps, target)], deadline_at, for_worker, on_unhealthy,
                       sent=for_worker)[0]


def create_many(store, lab: Lab, entries: list[tuple[dict, list[dict], str]], deadline_at: float | None = None,
                for_worker: bool = False, on_unhealthy: str | None = None, sent: bool = False,
                suite: str | None = None) -> list[dict]:
    """``create`` for several ``(job, steps, target)`` at once (a suite's), recorded in one transaction;
    ``sent``: they are published right now (else ``remote.publish_all`` marks them sent); ``suite``: the suite's
    name, recorded with one run id for all of them (the dashboard shows a suite run as one unit)."""
    import uuid

    from controller.jobs import health

    run = {"name": suite, "run": uuid.uuid4().hex[:12]} if suite else None
    drafts = []
    for job, steps, target in entries:
        draft = {**spec.payload(job, steps, target, 0, lab, for_worker),
                 **health.extras(lab, target, on_unhealthy or job["data"].get("on_unhealthy"))}
        if deadline_at is not None:
            draft["deadline_at"] = deadline_at
        if for_worker:
            draft["via"] = "broker"  # a reconciler may send it again to the host's queue
        if run:
            draft["suite"] = run
        drafts.append((job["data"]["name"], target, lab.target(target).get("host"), draft))
    ids = store.create_jobs(drafts, sent=sent)
    return [{**draft, "job_id": job_id} for (_, _, _, draft), job_id in zip(drafts, ids)]


def deadline_at(deadline_s: float | None) -> float | None:
    return None if deadline_s is None else time.time() + deadline_s


def pick_target(leases, targets: list[str]) -> str:
    """A free target among the candidates, else the first (its job waits for the lease)."""
    for t in targets:
        if leases.current(t) is None:
            return t
    return targets[0]


def run_now(path: Path, lab: Lab, target: str | None, progress, deadline_s: float | None = None) -> dict:
    return run_prepared(spec.prepare(path, lab, target), lab, progress, deadline_s)


def run_prepared(prepared: tuple[dict, list[dict], list[str]], lab: Lab, progress,
                 deadline_s: float | None = None) -> dict:
    """``run_now`` for a job already checked (``spec.prepare``'s tuple); the finished job. (A bisection makes
    and runs its probes itself, several at once: ``controller.jobs.bisect``.)"""
    from bench_agent.jobs.runner import JobRunner

    job, steps, targets = prepared
    store, leases = backends.results_store(), backends.lease_store(lab.key)
    payload = create(store, lab, job, steps, pick_target(leases, targets), deadline_at(deadline_s))
    runner = JobRunner(store, leases, holder_name("panio job run"), progress, caller=dispatch_caller(lab),
                       planner=spec.planner(lab))
    try:
        runner.run(payload)
    except KeyboardInterrupt:
        store.finish(payload["job_id"], "canceled", None, "interrupted (Ctrl-C)",
                     Canceled("interrupted").to_json())
        raise
    return store.job(payload["job_id"])


def dispatch_caller(lab):
    """How ``panio job run`` (and suites, health checks) run a job's steps in this process: each operation
    through the lab's dispatcher to the target's host (in-process, SSH or the host's worker), presenting the
    job's lease token, which the host checks again before any side effect."""
    from controller.dispatch import Dispatcher

    def caller(target: str, token: str, leases):
        d = Dispatcher(lab, leases=leases, token=token)
        return lambda op, args: d.call(target, op, args)

    return caller


def wait_done(store, job_id: int, timeout_s: float | None, poll_s: float = 0.2) -> dict:
    """Poll the results database until the job is done (or ``timeout_s`` passes)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        job = store.job(job_id)
        if job["state"] == "done" or (deadline is not None and time.monotonic() >= deadline):
            return job
        time.sleep(poll_s)
