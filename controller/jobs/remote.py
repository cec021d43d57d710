"""Jobs through a broker: queue a job to the worker of the host that owns its target, and follow it.

The payload names the target and carries each step's planned options; the
worker takes the target's configuration (hooks, actions, devices) from its
host's own lab file, never from the payload, and refuses a step whose
options differ from it. Messages are signed. The controller and the workers
share the results database (``PANIO_RESULTS_URL``), Redis (``PANIO_BROKER``)
and the lab's configuration (``panio setup`` installs it on each host).
A target without a host is served by ``panio worker --host local``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from bench_agent import outage
from bench_agent.errors import Unreachable
from controller import backends
from controller.jobs import local, spec
from controller.lab.model import Lab

LOCAL_HOST = "local"
QUEUED_HINT_S = 10.0  # after this long still queued, say which worker the job waits for
EXPIRE_GRACE_S = 10.0  # after the deadline, how long a running job's runner has to stop it itself
_log = logging.getLogger("panio.jobs")


def reconciler(app=None):
    """The controller's reconciler: it may send a job again (the message its own key sealed, kept with the job:
    ``bench_agent.jobs.sealed``) and look for vanished broker messages."""
    from bench_agent.jobs import sealed, signing
    from bench_agent.jobs.reconcile import BrokerView, Reconciler

    app, store, keys = app or backends.celery_app(), backends.results_store(), signing.configured()
    from controller.jobs.lost_window import keeper

    return Reconciler(store, backends.lease_store(),
                      resend=lambda job: sealed.send_again(app, store, job, keys, own_only=True),
                      broker=BrokerView(backends.broker_url(), backends.redis_prefix()), on_lost=keeper(store))


def keep_sealed(app, store, payloads: list[dict]) -> list[str]:
    """Seal each recorded job's message (signed with this controller's key) and keep them with the jobs, in one
    transaction, before any is published: the only messages a reconciler may send again."""
    from bench_agent.jobs import sealed

    messages = [sealed.seal(app, p) for p in payloads]
    store.keep_messages([(p["job_id"], m) for p, m in zip(payloads, messages)])
    return messages


def publish(app, store, payload: dict, message: str | None = None) -> str:
    """Send a recorded job to its host's queue, its message sealed and kept first (``keep_sealed``, unless
    ``message`` is the one kept); a broker that does not take it ends the job unreachable. (The job was recorded
    as sent when it was created: ``ResultStore.create_job``.)"""
    from bench_agent.jobs import sealed
    from bench_agent.jobs.worker import queue_name

    host = payload["target_config"].get("host") or LOCAL_HOST
    message = message or keep_sealed(app, store, [payload])[0]
    try:
        sealed.publish(app, payload, message, f"panio-job-{payload['job_id']}")
    except Exception as exc:  # kombu/redis errors: the broker is the boundary
        store.finish(payload["job_id"], "incomplete", None, f"not queued: broker unreachable: {exc}",
                     Unreachable("broker unreachable").to_json())
        raise Unreachable(f"broker {backends.broker_url()} unreachable: {exc}", job=payload["job_id"]) from None
    return queue_name(host)


def publish_all(app, store, payloads: list[dict]) -> list[str]:
    """``publish`` each of ``payloads`` (recorded together, not yet sent: ``local.create_many``; their messages
    kept in one transaction first), then mark them sent in one statement; their queues. A broker that refuses one
    ends it and every one after it unreachable (not queued), and raises ``Unreachable``; the ones it took are
    marked sent first."""
    queues: list[str] = []
    messages = keep_sealed(app, store, payloads)
    try:
        for payload, message in zip(payloads, messages):
            queues.append(publish(app, store, payload, message))
    except Unreachable as err:
        for payload in payloads[len(queues) + 1:]:
            store.finish(payload["job_id"], "incomplete", None, f"not queued: {err.message}",
                         Unreachable("broker unreachable").to_json())
        raise
    finally:
        if queues:
            store.mark_sent([p["job_id"] for p in payloads[:len(queues)]])
    return queues


def submit(path: Path, lab: Lab, target: str | None, deadline_s: float | None = None) -> dict:
    """Check, record and queue a job; returns its payload (with the queue it went to)."""
    app = backends.celery_app()
    job, steps, targets = spec.prepare(path, lab, target)
    store = backends.results_store()
    chosen = local.pick_target(backends.lease_store(lab.key), targets)
    payload = local.create(store, lab, job, steps, chosen, local.deadline_at(deadline_s), for_worker=True)
    queue = publish(app, store, payload)
    return {**payload, "queue": queue, "host": payload["target_config"].get("host") or LOCAL_HOST}


def follow(job_id: int, progress, poll_s: float = 0.25, queue_timeout_s: float | None = None,
           deadline_at: float | None = None, watch: list[int] | None = None, rec=None) -> dict:
    """Wait for a queued job to finish, reporting each step as its result lands.

    While it waits it reconciles the jobs in ``watch`` (default: this one): a job whose
    worker died or whose broker message vanished is sent again, a dead runner's job ends.
    With ``queue_timeout_s``, a job no worker has started by then is withdrawn and ends
    ``incomplete`` as unreachable, so CI never hangs on a host without a worker. At
    ``deadline_at`` (epoch seconds) a job not started is withdrawn as timed out; a
    running one is given ``EXPIRE_GRACE_S`` to stop itself, then canceled and returned.
    """
    from bench_agent.jobs.reconcile import RECONCILE_S

    store, rec, shown = backends.results_store(), rec or reconciler(), _Shown(progress)
    since, last_pass = time.monotonic(), 0.0
    outages = outage.Outages(_log.warning, f"following job {job_id}")
    while True:
        try:  # the database or Redis away: the jobs go on on their hosts; wait for it (said once), then go on
            if time.monotonic() - last_pass >= RECONCILE_S:
                last_pass = time.monotonic()
                rec.pass_(watch or [job_id])
            job = store.job(job_id)
        except Exception as exc:
            if not outages.failed(exc):
                raise
            time.sleep(outages.delay_s())
            continue
        if outages.down:
            outages.ok()
        if job["state"] == "queued" and _withdrawn(store, job, time.monotonic() - since, queue_timeout_s, deadline_at):
            continue
        shown.update(job, time.monotonic() - since)
        if job["state"] == "done":
            return job
        if deadline_at is not None and time.time() >= deadline_at + EXPIRE_GRACE_S:
            store.request_cancel(job_id)  # its runner did not stop at the deadline: make it stop now
            return store.job(job_id)
        time.sleep(poll_s)


class _Shown:
    """What a follower has reported so far: each event once, steps as their results land."""

    def __init__(self, progress) -> None:
        self.progress, self.steps, self.started, self.hinted = progress, 0, False, False

    def update(self, job: dict, waited_s: float) -> None:
        if job["state"] == "queued" and not self.hinted and waited_s > QUEUED_HINT_S:
            self.hinted = True
            self.progress("waiting", {"job_id": job["id"], "host": job["host"] or LOCAL_HOST})
        if job["state"] == "running" and not self.started:
            self.started = True
            self.progress("job_start", {"job_id": job["id"], "target": job["target"]})
        done_steps = [s for s in job["steps"] if s["status"] not in ("skipped", "running")]
        for s in done_steps[self.steps:]:
            self.progress("step_start", {"idx": s["idx"], "name": s["name"], "command": s["command"],
                                         "count": len(job["spec"]["steps"])})
            self.progress("step_end", {**s, "duration_s": s.get("duration_s") or 0.0})
        self.steps = len(done_steps)
        if job["state"] == "done":
            self.progress("job_end", {"job_id": job["id"], "health": job["health"], "result": job["result"],
                                      "reason": job["reason"]})


def _withdrawn(store, job: dict, waited_s: float, queue_timeout_s: float | None, deadline_at: float | None) -> bool:
    """Withdraw a job still queued past the queue timeout or the run's deadline; True if it was due."""
    if queue_timeout_s is not None and waited_s >= queue_timeout_s:
        _withdraw(store, job, queue_timeout_s)
        return True
    if deadline_at is not None and time.time() >= deadline_at:
        from bench_agent.jobs.reconcile import expire_unstarted

        expire_unstarted(store, job["id"])
        return True
    return False


def _withdraw(store, job: dict, waited_s: float) -> None:
    """Take back a job that no worker started: a worker that picks it up later drops it (cancel requested)."""
    from bench_agent.jobs.worker import queue_name

    host = job["host"] or LOCAL_HOST
    store.request_cancel(job["id"])
    store.finish(job["id"], "incomplete", None,
                 f"no worker started the job within {waited_s:g} s (queue {queue_name(host)}); "
                 f"is `panio worker --host {host}` running? (or the target's lease is held)",
                 {"error": "unreachable", "exit": 4, "message": f"no worker started job {job['id']}",
                  "hint": f"start `panio worker --host {host}` on that host"}, only_if_queued=True)
