"""What the job runner does about device health: gate new jobs, run health checks, record changes.

* Before leasing, a job on a ``bad`` or ``maintenance`` target waits until the
  target is usable again (``on_unhealthy = "wait"``, bounded by ``lease_wait_s``
  and the run's deadline; a job's default) or is skipped at once
  (``on_unhealthy = "skip"``; a suite's default); either way it ends
  ``incomplete`` as ``busy`` (8), result ``skipped``, with the health, its
  reason and who set it. A ``bad`` target whose automatic re-check is due is
  not held: the job's runner runs the re-check first, as below.
* Holding the lease, before a job's steps: when the target names a health-check
  job and its health is ``unknown`` (or the last check is older than its
  ``every_s``, or its automatic re-check is due), the check runs first, as a job
  of its own (``kind = "health_check"``, ``auto``). Passing makes the target
  ``good``; failing makes it ``bad`` (re-checked with backoff, ``health``) and
  the job waiting behind it ends ``incomplete``, skipped.
* A job that ends ``incomplete`` makes the target ``unknown``, and its health
  check runs at once, still under the same lease; unless the target's next
  job started meanwhile (the job had lost its lease): that job speaks for it.
* An automatic check is never burned on a lab fault that is plainly there
  (``lab_probe.check_blockers``): the target is held ``bad`` with that fault as
  the reason, and the lab is asked again ``retry_s`` later.

The payload carries what a worker needs (it has no lab file): ``health_check``
(the compiled check job), ``on_unhealthy`` and ``kind``.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from bench_agent.errors import Busy
from bench_agent.health import state as h
from bench_agent.jobs import lab_probe

POLL_S = 1.0
Call = Callable[[str, dict[str, Any]], Any]
RunCheck = Callable[[dict, str], dict]  # (the check's payload, why it runs) -> its summary, run as a job of its own


class HealthGate:
    """The health side of one runner: ``progress`` hears of health changes, holds and checks (``job_start``..)."""

    def __init__(self, url: str | Any, worker: str, progress: Callable[[str, dict[str, Any]], None]) -> None:
        """``url``: the results database, or a health store itself (a reporting host's, ``ReportedHealth``)."""
        self.store = h.HealthStore(url) if isinstance(url, str) else url
        self.worker, self.progress = worker, progress
        self.last: dict | None = None  # the target's health record ``blocked`` read last (it let the job through)

    def blocked(self, payload: dict, wait_s: float, should_stop: Callable[[], bool],
                seen: dict | None = None) -> Busy | None:
        """None once the target is usable; else why the job may not run (after waiting, unless skipping).
        ``seen``: the target's health record as read an instant before (with the job's take), standing for
        the first read; every later one reads the store."""
        self.last = None
        if payload.get("kind") == "health_check":
            return None  # a check is how a bad target gets well
        skip = payload.get("on_unhealthy") == "skip"
        end = time.monotonic() + wait_s
        while True:
            record = seen if seen is not None else self.store.get(payload["target"])
            seen = None  # the take's read stands for the first look only
            if not self._holds(payload, record):
                self.last = record
                return None
            if skip or time.monotonic() >= end or should_stop():
                return _held(payload, record, "skipped (on_unhealthy = \"skip\")" if skip
                             else f"waited {round(wait_s, 1):g} s")
            time.sleep(min(POLL_S, max(0.0, end - time.monotonic())))

    @staticmethod
    def _holds(payload: dict, record: dict) -> bool:
        """A bad target whose automatic re-check is due lets a job through that waits for it (its runner runs the
        re-check first); one that skips (a suite's) is skipped at once: the re-check is the scheduler's, and a bad
        board's re-checks never hold a suite (issue 43)."""
        return record["health"] in h.BLOCKING and not (payload.get("health_check") and
                                                       payload.get("on_unhealthy") != "skip" and
                                                       h.recheck_due(record, time.time()))

    def before_steps(self, payload: dict, record: dict | None = None) -> tuple[str | None, Busy | None]:
        """Holding the lease: (why the target's health check must run first, None), (None, why the job may not
        run after all: the target became unusable meanwhile) or (None, None). ``record``: the target's health as
        ``blocked`` read it, when the lease came at once after that read (nothing waited in between: a second
        read would see the same instant); else it is read again."""
        if payload.get("kind") == "health_check":
            return None, None
        record = record if record is not None else self.store.get(payload["target"])
        if self._holds(payload, record):
            return None, _held(payload, record, "held back after its lease was granted")
        now, claim = time.time(), getattr(self.store, "claim_recheck", None)  # (a reporting host's: the recorder's)
        if payload.get("health_check") and h.recheck_due(record, now) and claim is not None and not claim(
                payload["target"], now):  # one re-check at a time per target: another asker took this one
            record = self.store.get(payload["target"])
            if record["health"] in h.BLOCKING:
                return None, _held(payload, record, "its automatic re-check runs elsewhere")
        return h.check_due(record, payload.get("health_check"), now), None

    def before_job(self, payload: dict, call: Call, run_check: RunCheck, record: dict | None = None) -> Busy | None:
        """Holding the lease, before a job's steps: None when they may run, else why not. A due health check runs
        first (``health_check``); an automatic check asks the lab first (``hold_for_lab``). ``record``: as for
        ``before_steps``."""
        why, held = self.before_steps(payload, record)
        if held is None and payload.get("kind") == "health_check" and payload.get("auto"):
            held = self.hold_for_lab(payload, payload, payload["job_id"], call)
        if why:
            check = self.health_check(payload, call, f"before job {payload['job_id']}: {why}", run_check)
            held = check.get("held")
            if held is None and (check["health"], check["result"]) != ("complete", "passed"):
                held = Busy(f"target {payload['target']} failed its health check (job {check['job_id']}): "
                            f"{check['reason']}", hint=f"see `panio job status {check['job_id']}`",
                            target=payload["target"], health_check=check["job_id"])
        return held

    def health_check(self, payload: dict, call: Call, why: str, run_check: RunCheck) -> dict:
        """Run the target's health-check job now (``run_check``: as a job of its own, under this job's lease), not
        when the lab is plainly at fault: then ``held`` says why, and no job is made. The check's summary."""
        check = {**payload["health_check"], "target": payload["target"], "kind": "health_check", "auto": True,
                 "notify": payload.get("notify", []), "lease_ttl_s": payload.get("lease_ttl_s", 30),
                 **({"lab_key": payload["lab_key"]} if payload.get("lab_key") else {})}  # the job's lab's too
        held = self.hold_for_lab(payload, check, payload["job_id"], call)
        if held is not None:
            return {"job_id": None, "health": "incomplete", "result": "skipped", "reason": held.message, "held": held}
        return run_check(check, why)

    def hold_for_lab(self, payload: dict, check: dict, job_id: int | None, call: Call) -> Busy | None:
        """An automatic health check asks the lab first; a fault plainly there holds it (the target bad, the
        fault as the reason) instead of burning it. None when the check may run."""
        found = lab_probe.check_blockers(call, payload["target"], payload.get("target_config") or {}, check["steps"])
        if not found:
            return None
        reason = self.held_for_lab(check, found, job_id)
        self.progress("health_check_held", {"target": payload["target"], "reason": reason})
        return Busy(f"target {payload['target']} is held bad: {reason}", target=payload["target"], health="bad",
                    hint="fix the lab; the health check runs again on its own (or `panio target health "
                         f"{payload['target']} --check`)")

    def set(self, payload: dict, health: str, reason: str, job_id: int | None, checked: bool = False,
            **auto) -> None:
        previous, record = self.store.set(payload["target"], health, reason, self.worker, job_id, checked, **auto)
        if previous != health:
            self._changed(payload, previous, record)

    def _changed(self, payload: dict, previous: str, record: dict) -> None:
        self.progress("health_changed", {"target": record["target"], "previous": previous, "health": record["health"],
                                         "reason": record["reason"]})
        changed(payload.get("notify"), previous, record)

    def held_for_lab(self, check: dict, faults: list[dict], job_id: int | None) -> str:
        """An automatic check not run: the lab is at fault. The target is held bad (not burned: the failures
        count stays) and the lab is asked again ``retry_s`` later. Returns the reason."""
        reason, again = h.held(faults, check, time.time())
        if not self.store.postpone(check["target"], reason, again):
            self.set(check, "bad", reason, job_id, recheck_at=again, failures=0)
        return reason

    def after(self, payload: dict, summary: dict, jobs: Any = None) -> None:
        """Record what a finished job says about its target (``jobs``: the results store its verdict is in)."""
        job_id = summary["job_id"]
        if payload.get("kind") == "health_check":
            if summary.get("gated"):
                return  # held for the lab (held_for_lab said so): not a verdict on the board
            passed = summary["health"] == "complete" and summary["result"] == "passed"
            away = _lab_service_away(summary)
            if away is not None:  # the lab's own Redis or database failed under it: no verdict on the board
                again = {"recheck_at": time.time() + h.backoff_s(1, payload)} if payload.get("auto") else {}
                self.set(payload, "unknown", f"health check job {job_id} could not judge the board: the lab's "
                         f"{away} was unreachable ({summary['reason']})", job_id, **again)
                return
            verdict = "passed" if passed else f"failed: {summary['reason'].removeprefix('failed: ')}"
            auto = {}
            if not passed and payload.get("auto"):
                record = self.store.get(payload["target"])
                failures = (record.get("failures") or 0) + 1 if record["health"] == "bad" else 1
                auto = {"failures": failures, "recheck_at": time.time() + h.backoff_s(failures, payload)}
            self.set(payload, "good" if passed else "bad", f"health check job {job_id} {verdict}", job_id, True,
                     **auto)
        elif summary["health"] == "incomplete" and not summary.get("gated"):
            job = {**jobs.job(job_id), "id": job_id, "target": payload["target"]}  # a reporting host's: its id only
            written = after_incomplete(self.store, jobs, job, summary["reason"], self.worker,
                                       payload.get("health_check"), check_runs_now=True)
            if written is not None and written[0] != "unknown":
                self._changed(payload, *written)


def after_incomplete(health: Any, jobs: Any, job: dict, reason: str, set_by: str, check: dict | None,
                     check_runs_now: bool) -> tuple[str, dict] | None:
    """What a job that ended incomplete says about its target, for its runner and for a reconciler alike (the one
    place): the target's health becomes ``unknown``; unless a job of the target started after it (the job had
    lost its lease and ended late): that job's gate and verdict speak for the target now, and nothing is written
    (None). ``check_runs_now``: the runner runs the target's health check at once, under the job's lease; a
    reconciler cannot, so the automatic re-check is due ``retry_s`` later (``backoff_s``). (previous, record)."""
    if jobs.later_job_started(job):
        return None
    again = {"recheck_at": time.time() + h.backoff_s(1, check)} if check and not check_runs_now else {}
    return health.set(job["target"], "unknown", f"job {job['id']} ended incomplete: {reason}", set_by, job["id"],
                      **again)


def _lab_service_away(summary: dict) -> str | None:
    """Which of the lab's own services (Redis, the results database) a check that ended incomplete says was
    unreachable under it (its error, as the runner recorded it), or None."""
    from bench_agent import outage
    from bench_agent.errors import Unreachable

    error = summary.get("error") or {}
    if summary.get("health") != "incomplete":
        return None
    if error.get("service") in (outage.DB, outage.REDIS):  # a lease lost to Redis away (``Lease.riding_out``)
        return error["service"]
    if error.get("error") != "unreachable":
        return None
    texts = [str(error.get("message") or ""), str(summary.get("reason") or "")]
    for text in texts:
        for part in (text, *text.split(": ")):  # "lease lost: Redis at ... unreachable", "step 'x': lab failure: ..."
            found = outage.service_down(Unreachable(part.strip()))
            if found is not None:
                return found
    return None


def changed(configs: list[dict] | None, previous: str, record: dict) -> None:
    """Tell the lab's notify channels that a target's health changed (``record``: the health store's new record)."""
    from bench_agent.jobs import notify

    notify.send(configs, "health_changed",
                {"target": record["target"], "previous": previous, "health": record["health"],
                 "reason": record["reason"], "set_by": record["set_by"], "job_id": record.get("job_id")})


def _held(payload: dict, record: dict, how: str) -> Busy:
    t = payload["target"]
    fix = (f"lift it with `panio target health {t} --set good`" if record["health"] == "maintenance"
           else f"its health check must pass: `panio target health {t} --check`"
           + (" (it is re-checked automatically)" if record.get("recheck_at") else ""))
    return Busy(f"target {t} is {h.describe(record)}: no new job runs on it; {how}", hint=fix, target=t,
                health=record["health"])
