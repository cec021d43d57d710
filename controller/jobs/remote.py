"""Jobs through a broker: queue a job to the worker of the host that owns its target, and follow it.

The payload carries the target's configuration, so a worker needs no lab
file; the controller and the workers share the results database
(``PANIO_RESULTS_URL``) and Redis (``PANIO_BROKER``) and nothing else.
A target without a host is served by ``panio worker --host local``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench_agent.errors import NotConfigured, Unreachable
from controller.jobs import backends, local, spec
from controller.lab.model import Lab

LOCAL_HOST = "local"
QUEUED_HINT_S = 10.0  # after this long still queued, say which worker the job waits for


def visibility_timeout_s() -> float:
    from bench_agent.worker import DEFAULT_VISIBILITY_S

    return float(os.environ.get("PANIO_VISIBILITY_TIMEOUT_S", DEFAULT_VISIBILITY_S))


def celery_app():
    from bench_agent.worker import make_app

    url = backends.broker_url()
    if not url:
        raise NotConfigured("no broker: set PANIO_BROKER=redis://HOST:6379/N to queue jobs to workers",
                            hint="or run the job here with `panio job run FILE`")
    return make_app(url, backends.redis_prefix(), visibility_timeout_s())


def submit(path: Path, lab: Lab, target: str | None) -> dict:
    """Check, record and queue a job; returns its payload (with the queue it went to)."""
    from bench_agent.worker import queue_name, submit as send

    app = celery_app()
    job, steps, targets = spec.prepare(path, lab, target)
    store = backends.results_store()
    chosen = local.pick_target(backends.lease_store(), targets)
    payload = local.create(store, lab, job, steps, chosen)
    host = lab.target(chosen).get("host") or LOCAL_HOST
    payload["target_config"] = dict(lab.target(chosen))
    try:
        send(app, payload, host)
    except Exception as exc:  # kombu/redis errors: the broker is the boundary
        store.finish(payload["job_id"], "incomplete", None, f"not queued: broker unreachable: {exc}",
                     Unreachable("broker unreachable").to_json())
        raise Unreachable(f"broker {backends.broker_url()} unreachable: {exc}", job=payload["job_id"]) from None
    return {**payload, "queue": queue_name(host), "host": host}


def follow(job_id: int, progress, poll_s: float = 0.25, timeout_s: float | None = None,
           queue_timeout_s: float | None = None) -> dict:
    """Wait for a queued job to finish, reporting each step as its result lands.

    With ``queue_timeout_s``, a job no worker has started by then is withdrawn and
    ends ``incomplete`` as unreachable, so CI never hangs on a host without a worker.
    """
    from bench_agent.jobs.runner import mark_lost

    store, leases = backends.results_store(), backends.lease_store()
    seen, started, hinted, since = 0, False, False, time.monotonic()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        job = store.job(job_id)
        if job["state"] == "queued" and queue_timeout_s is not None and time.monotonic() - since >= queue_timeout_s:
            _withdraw(store, job, queue_timeout_s)
            continue
        if job["state"] == "queued" and not hinted and time.monotonic() - since > QUEUED_HINT_S:
            hinted = True
            progress("waiting", {"job_id": job_id, "host": job["host"] or LOCAL_HOST})
        if job["state"] == "running" and not started:
            started = True
            progress("job_start", {"job_id": job_id, "target": job["target"]})
        done_steps = [s for s in job["steps"] if s["status"] != "skipped"]
        for s in done_steps[seen:]:
            progress("step_start", {"idx": s["idx"], "name": s["name"], "command": s["command"],
                                    "count": len(job["spec"]["steps"])})
            progress("step_end", {**s, "duration_s": s.get("duration_s") or 0.0})
        seen = len(done_steps)
        if job["state"] == "running" and _lost(store, leases, job, mark_lost):
            continue
        if job["state"] == "done":
            progress("job_end", {"job_id": job_id, "health": job["health"], "result": job["result"],
                                 "reason": job["reason"]})
            return job
        if deadline is not None and time.monotonic() >= deadline:
            return job
        time.sleep(poll_s)


def _withdraw(store, job: dict, waited_s: float) -> None:
    """Take back a job that no worker started: a worker that picks it up later drops it (cancel requested)."""
    from bench_agent.worker import queue_name

    host = job["host"] or LOCAL_HOST
    store.request_cancel(job["id"])
    store.finish(job["id"], "incomplete", None,
                 f"no worker started the job within {waited_s:g} s (queue {queue_name(host)}); "
                 f"is `panio worker --host {host}` running? (or the target's lease is held)",
                 Unreachable(f"no worker started job {job['id']}",
                             hint=f"start `panio worker --host {host}` on that host").to_json(), only_if_queued=True)


def _lost(store, leases, job: dict, mark_lost) -> bool:
    try:
        return mark_lost(store, leases, job)
    except Unreachable:
        return False  # Redis is away (restarting?): judge the job's worker when it is back
