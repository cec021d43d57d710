"""What the job runner does about device health: gate new jobs, run health checks, record changes.

* Before leasing, a job on a ``bad`` or ``maintenance`` target waits until the
  target is usable again (``on_unhealthy = "wait"``, the default, bounded by
  ``lease_wait_s`` and the run's deadline) or is skipped at once
  (``on_unhealthy = "skip"``); either way it ends ``incomplete`` as ``busy`` (8)
  with the health, its reason and who set it.
* Holding the lease, before a job's steps: when the target names a health-check
  job and its health is ``unknown`` (or the last check is older than its
  ``every_s``), the check runs first, as a job of its own (``kind = "health_check"``).
  Passing makes the target ``good``; failing makes it ``bad`` and the job waiting
  behind it ends ``incomplete``.
* A job that ends ``incomplete`` (the lab failed) makes the target ``unknown``,
  and its health check runs at once, still under the same lease.

The payload carries what a worker needs (it has no lab file): ``health_check``
(the compiled check job), ``on_unhealthy`` and ``kind``.
"""

from __future__ import annotations

import time
from typing import Callable

from bench_agent.errors import Busy
from bench_agent.jobs import health as h

POLL_S = 1.0


class HealthGate:
    def __init__(self, url: str, worker: str, on_change: Callable[[dict, str, dict], None]) -> None:
        self.store, self.worker, self.on_change = h.HealthStore(url), worker, on_change

    def blocked(self, payload: dict, wait_s: float, should_stop: Callable[[], bool]) -> Busy | None:
        """None once the target is usable; else why the job may not run (after waiting, unless skipping)."""
        if payload.get("kind") == "health_check":
            return None  # a check is how a bad target gets well
        skip = payload.get("on_unhealthy") == "skip"
        end = time.monotonic() + wait_s
        while True:
            record = self.store.get(payload["target"])
            if record["health"] not in h.BLOCKING:
                return None
            if skip or time.monotonic() >= end or should_stop():
                how = "skipped (on_unhealthy = \"skip\")" if skip else f"waited {round(wait_s, 1):g} s"
                fix = ("lift it with `panio target health {t} --set good`" if record["health"] == "maintenance"
                       else "its health check must pass: `panio target health {t} --check`").format(t=payload["target"])
                return Busy(f"target {payload['target']} is {h.describe(record)}: no new job runs on it; {how}",
                            hint=fix, target=payload["target"], health=record["health"])
            time.sleep(min(POLL_S, max(0.0, end - time.monotonic())))

    def check_reason(self, payload: dict) -> str | None:
        """Why the target's health check must run before this job, or None."""
        if payload.get("kind") == "health_check":
            return None
        return h.check_due(self.store.get(payload["target"]), payload.get("health_check"), time.time())

    def set(self, payload: dict, health: str, reason: str, job_id: int | None, checked: bool = False) -> None:
        previous, record = self.store.set(payload["target"], health, reason, self.worker, job_id, checked)
        if previous != health:
            self.on_change(payload, previous, record)

    def after(self, payload: dict, summary: dict) -> None:
        """Record what a finished job says about its target."""
        job_id = summary["job_id"]
        if payload.get("kind") == "health_check":
            passed = summary["health"] == "complete" and summary["result"] == "passed"
            verdict = "passed" if passed else f"failed: {summary['reason'].removeprefix('failed: ')}"
            self.set(payload, "good" if passed else "bad", f"health check job {job_id} {verdict}", job_id, True)
        elif summary["health"] == "incomplete" and not summary.get("gated"):
            self.set(payload, "unknown", f"job {job_id} ended incomplete: {summary['reason']}", job_id)
