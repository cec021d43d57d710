"""JobRunner: lease a job's target, claim the job, run its steps, record everything.

Job payload (plain data, built by ``controller.jobs.spec``)::

    {"job_id": 7, "name": "smoke", "target": "pico", "timeout_s": 600,
     "lease_ttl_s": 30, "lease_wait_s": 300, "target_config": {...},
     "steps": [{"name": "boot", "argv": ["serial", "transact", "${target}", "uname -a", "--until", "# $"],
                "command": "panio serial transact ${target} 'uname -a' --until '# $'", "timeout_s": 60,
                "run": {"op": "serial.transact", "args": {"target": "pico", "iface": {...},
                        "text": "uname -a", "until": "# $", ...}},
                "expect_exit": [0], "expect_output": null, "reject_output": null,
                "capture": {}, "continue_on_failure": false}]}

Each step runs in this process (``steps.execute``): the body ``panio`` would run
for its command line (``bench_agent.commands``), its operations reached through
``caller`` with the job's lease token — on a worker the local ops layer (the
host checks the lease and the fence again), in ``panio job run`` the
controller's dispatcher. No child ``panio``, no lab file, no stderr parsed back.

Health (the lab) and result (the board) are decided apart:

* ``complete``   every step that should run ran and was judged; result passed/failed;
* ``incomplete`` the lab failed: lease not obtained or lost, a step exited with
                 a lab status (unreachable, busy, not configured, ...), the worker died;
* ``canceled``   someone ran ``panio job cancel``;
* ``timed_out``  a step or the whole job ran out of time.

A runner first *takes* a queued job (it holds it while waiting for the lease)
and beats for it in the results database (``reconcile.Heartbeat``); claiming is
atomic (queued -> running), so a copy that is delivered twice finds the job
taken and does nothing. Each step is recorded as running before it starts,
so a runner that dies mid-step leaves a trace a reconciler turns into an error;
its result is written in the same commit as the next step's start (or the
skipped steps, or the verdict), and the cancel is read in it: one commit per step.
``deadline_at`` in the payload (epoch seconds, from ``--deadline-s``) bounds the
lease wait and the steps like ``timeout_s`` does.

Device health (``health_gate``): a job on a bad or maintenance target waits or
is skipped; a due health check runs first under the job's lease, and again
right after a job ends incomplete. A step that fails or times out is blamed on
the board only after the lab is asked (``lab_probe``). Every step's environment
says when the job and the previous step began (``serial wait --since-step``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable

from bench_agent import outage
from bench_agent.errors import Busy, Canceled, PanioError, Refused, Timeout, Unreachable
from bench_agent.leases import base as leasing
from bench_agent.jobs import lab_probe, reconcile, screens, serial_window
from bench_agent.jobs.started import AlreadyStarted
from bench_agent.results.store import ResultStore
from bench_agent.jobs.steps import (OUTPUT_LIMIT, bind, command_line, execute, judge, known_variables, planned,
                                    reads_console)

Progress = Callable[[str, dict[str, Any]], None]
Call = Callable[[str, dict[str, Any]], Any]
Caller = Callable[[str, int, Any], Call]  # (target, lease token, lease store) -> call(op, args)
DEADLINE_ERROR = reconcile.DEADLINE_ERROR
# The first step's lease check reads nothing while the grant's own read-back is younger than this: the lease
# was confirmed held an instant before (``RedisLeaseStore.try_acquire``); every later step reads the store, and
# the host checks the token before any side effect whatever the runner did (``lease_guard``).
GRANT_FRESH_S = 0.5


@functools.cache
def _waits() -> outage.Outages:
    """This process's runners' waits for Redis (one line when it goes, one when it is back)."""
    import logging

    return outage.Outages(logging.getLogger("panio.worker").warning, "lease store")


def _deadline_left_s(payload: dict) -> float | None:
    """Seconds left before the run's deadline (``panio ... --deadline-s``), None without one."""
    at = payload.get("deadline_at")
    return None if at is None else at - time.time()


def _quiet(event: str, data: dict[str, Any]) -> None:
    pass


def local_caller(target: str, token: str, leases: Any, lab_key: str | None = None) -> Call:
    """The worker's road: operations in this process (the target's host), each request carrying the lease's
    credential (``TOKEN:SECRET``), so the host's lease guard checks the fence before any side effect, and
    the job's lab (``lab_key``), whose captures and leases the target's are. A request the guard refused because
    the lease store was out of reach is made again once it answers, for as long as the lease may still be held
    (``Lease.riding_out``; not after the step was stopped)."""
    from bench_agent import ops, process
    from bench_agent.errors import mark_outcome_unknown
    from bench_agent.leases.guard import unchecked, with_token
    from bench_agent.paths import LAB_ARG

    lease = getattr(token, "lease", None)  # a job's ``Presented`` lease; a bare token cannot wait for its store

    def once(op: str, args: dict[str, Any]) -> Any:
        sent = with_token(args, leases, token)
        return ops.call(op, {**sent, LAB_ARG: lab_key} if lab_key else sent)

    def call(op: str, args: dict[str, Any]) -> Any:
        try:
            if lease is None:
                return once(op, args)
            return lease.riding_out(lambda: once(op, args), _waits(), process.stopped, unchecked)
        except (Unreachable, Timeout) as err:
            if ops.spec(op).outcome_unknown_on_failure:
                mark_outcome_unknown(err, op, target, args)
            raise

    return call


def lab_caller(lab_key: str | None) -> Caller:
    """``local_caller`` for the jobs of lab ``lab_key`` (a payload's ``lab_key``; None: no lab)."""
    if not lab_key:
        return local_caller
    import functools

    return functools.partial(local_caller, lab_key=lab_key)


class JobRunner:
    def __init__(self, store: ResultStore, leases: leasing.LeaseStore, worker: str, progress: Progress = _quiet,
                 heartbeat: reconcile.Heartbeat | None = None, caller: Caller = local_caller,
                 planner: Callable[[str, list[str]], dict] | None = None, once: Any = None) -> None:
        """``once``: a worker's record of the job on its host (``started.JobRecord``), made as the job is claimed:
        a job the host started before is refused there, whatever the results database says."""
        self.store, self.leases, self.caller, self.planner = store, leases, caller, planner
        self.once = once
        self.worker, self.progress = worker, progress
        self.heartbeat = heartbeat or reconcile.Heartbeat(store)
        self._health = None
        self._held: list[tuple[list | None, str, dict]] | None = None  # notifications waiting for the serial log
        self._window: tuple[dict, Any] | None = None  # the serial log's marks and the lease's credential

    def run(self, payload: dict) -> dict | None:
        """Run the job; None if it is not this runner's to run (another live runner holds it, it started, or
        it was canceled)."""
        job_id = payload["job_id"]
        left_s = _deadline_left_s(payload)
        if left_s is not None and left_s <= 0:
            reconcile.expire_unstarted(self.store, job_id)
            return None
        stale = time.time() - reconcile.dead_after_s(payload)
        if payload.get("kind") == "health_check":  # its gate reads no health
            taken, seen = self.store.take(job_id, self.worker, stale), None
        else:  # the gate's first health read rides the take where it can (one statement on PostgreSQL)
            self._gate()  # its tables exist
            taken, seen = self.store.take_reading_health(job_id, self.worker, stale, payload["target"])
        if not taken:
            return None
        self.heartbeat.add(job_id)
        try:
            from bench_agent.paths import using_lab

            with using_lab(payload.get("lab_key")):  # what a step's body works out here (a TFTP root) is the lab's
                return self._run(payload, left_s, seen)
        finally:
            self.heartbeat.discard(job_id)

    def _claiming(self, claim: Callable[[], Any], mine: Callable[[Any], bool]) -> Any:
        """``claim()`` the job, recorded first on the host (``once``): ``AlreadyStarted`` if it started there before.
        The record is withdrawn when ``mine(answer)`` says the claim was not this runner's (nothing ran); one that
        raises keeps it (it may have been made: the job then ends refused, never runs twice)."""
        if self.once is None:
            return claim()
        if not self.once.record():
            raise AlreadyStarted(self.once.name)
        answer = claim()
        if not mine(answer):
            self.once.forget()
        return answer

    def _refused(self, payload: dict) -> None:
        """Another copy of this very message started the job on this host, between its intake and this claim."""
        err = Refused("not run: this host started it before, from this very message: a job runs at most once on "
                      "its host, whatever the results database says", job=payload["job_id"])
        self.progress("job_refused", {"job_id": payload["job_id"], "reason": err.message})
        self.store.finish(payload["job_id"], "incomplete", None, err.message, err.to_json(), only_if_queued=True)
        return None

    def _gate(self):
        from bench_agent.health.gate import HealthGate
        from bench_agent.health.state import HealthStore

        if self._health is None:
            # a reporting host's store carries the health it reads and reports (``ReportedHealth``)
            health = getattr(self.store, "health", None) or HealthStore(self.store.url)
            if isinstance(self.store, outage.Patient):  # a worker's: the gate waits for the database as the runner
                health = self.store.alike(health)
            self._health = HealthGate(health, self.worker, self.progress)
        return self._health

    def _run(self, payload: dict, left_s: float | None, seen: dict | None = None) -> dict | None:
        """``seen``: the target's health record read with the take (the gate's first read), None: not read."""
        job_id = payload["job_id"]
        wait_s = payload.get("lease_wait_s", 300)
        stopped = lambda: not self.store.still_queued(job_id)  # noqa: E731 - started elsewhere, or canceled
        blocked = self._gate().blocked(payload, wait_s if left_s is None else min(wait_s, left_s), stopped, seen)
        if blocked is not None:
            if self.store.state(job_id) != "queued":
                return None
            self._skip_rest(job_id, payload["steps"], 0, known_variables(job_id, payload["target"]))
            return self._finish(payload, "incomplete", "skipped", blocked.message, blocked.to_json(), gated=True)
        try:
            lease = leasing.acquire(
                self.leases, payload["target"],
                {"holder": self.worker, "job": job_id, "name": payload["name"]},
                payload.get("lease_ttl_s", 30), wait_s if left_s is None else min(wait_s, left_s),
                should_stop=stopped, durable_fence=False,  # the claim below is durable, and comes first
                claim=lambda target, token: self._claiming(
                    lambda: self.store.claim_fenced(job_id, self.worker, target, token), lambda done: done[1]))
        except AlreadyStarted:
            return self._refused(payload)
        except (Busy, Unreachable) as err:
            if self.store.state(job_id) != "queued":
                return None
            if left_s is not None and (_deadline_left_s(payload) or 0) <= 0.05:
                return self._finish(payload, "timed_out", None, f"the run's deadline passed while waiting for "
                                    f"the target's lease: {err.message}", DEADLINE_ERROR)
            return self._finish(payload, "incomplete", None, f"lease not obtained: {err.message}", err.to_json())
        try:
            # Leased first, claimed second: a job waiting for its lease stays queued, so if its worker
            # dies a reconciler can send it again; the claim makes sure only one copy ever runs it. The lease
            # store claimed it already with the token's fencing mark when it could (one statement).
            claimed = lease.claimed
            if claimed is None:
                try:
                    claimed = self._claiming(lambda: self.store.claim(job_id, self.worker, fence=lease.token), bool)
                except AlreadyStarted:
                    return self._refused(payload)
            if not claimed:
                return None
            lease.on_retake = lambda: self._retaken(job_id, lease)
            lease.keep(payload.get("lease_ttl_s", 30))
            self.progress("job_start", {"job_id": job_id, "target": payload["target"]})
            # One road to the target for the job's steps: a dispatcher keeps its connections (one SSH set-up).
            call = self.caller(payload["target"], leasing.Presented(lease), self.leases)
            self._window = (serial_window.marks(payload, call), leasing.Presented(lease))
            self._held = []  # a failure's notification carries its triage, which reads the serial log
            try:
                return self._checked_steps(payload, lease, call)
            finally:
                for name, text in self._serial_log(payload):  # unless the verdict carried it
                    self.store.add_artifact(job_id, name, text)
        finally:
            lease.release()
            self._send_held()  # after the release: the next job on the target need not wait for a triage

    def _checked_steps(self, payload: dict, lease: leasing.Lease, call: Call) -> dict:
        """The job's steps, unless the target's health gate holds them (``HealthGate.before_job``: a due health
        check runs first); after a job that ended incomplete, the check runs at once, still under the lease."""
        run_check = lambda check, why: self._check_job(payload, check, why, lease, call)  # noqa: E731
        held = self._lab_services(payload, lease) if payload.get("kind") == "health_check" else None
        if held is not None:
            return self._not_run(payload, held)
        # the lease came at once after the gate read the target's health: that read stands (no second one)
        seen = self._gate().last if lease.at_once else None
        held = self._gate().before_job(payload, call, run_check, seen)
        if held is not None:
            return self._not_run(payload, held)
        summary = self._steps(payload, lease, call)
        if summary["health"] == "incomplete" and payload.get("health_check") and not lease.lost \
                and payload.get("kind") != "health_check":
            self._gate().health_check(payload, call, f"job {payload['job_id']} ended incomplete", run_check)
        return summary

    def _not_run(self, payload: dict, held: Busy) -> dict:
        """The job does not run: ``held`` says why (its target's health, or the lab's services away)."""
        variables = known_variables(payload["job_id"], payload["target"])
        self._skip_rest(payload["job_id"], payload["steps"], 0, variables)
        return self._finish(payload, "incomplete", "skipped", held.message, held.to_json(), gated=True)

    def _lab_services(self, payload: dict, lease: leasing.Lease) -> Busy | None:
        """Before a health check starts: wait for the lab's own services, Redis (``lease``'s check, for as long as
        its TTL may hold it) and the results database (the target's health, read), each said once when it goes
        and once when it is back. None once both answer; else why the check did not start. A check run while
        either is away would judge the board for the lab's fault (issue 43)."""
        try:
            lease.riding_out(lease.check, _waits())
            self._gate().store.get(payload["target"])
        except Refused as err:  # the lease was lost (broken, expired, or its store away for longer than it holds)
            why, service = err.message, err.details.get("service")
        except Exception as err:
            service = outage.service_down(err)
            if service is None:
                raise
            why = outage.first_line(err)
        else:
            return None
        return Busy(f"target {payload['target']}'s health check did not start: "
                    + (f"the lab's {service} did not answer ({why})" if service else why),
                    hint="the check runs once the lab's services are back and a job leases the target again",
                    target=payload["target"], service=service)

    def _check_job(self, payload: dict, check: dict, why: str, lease: leasing.Lease, call: Call) -> dict:
        """Run the target's health check (``check``, from ``HealthGate.health_check``) as a job of its own, under
        this job's lease, once the lab's services answer (``_lab_services``); its summary."""
        held = self._lab_services(payload, lease)
        if held is not None:
            return {"job_id": None, "health": "incomplete", "result": "skipped", "reason": held.message, "held": held}
        host = (payload.get("target_config") or {}).get("host")
        check["check_of"] = payload["job_id"]  # under its lease (a reporting host's store reports the check so)
        try:
            check["job_id"] = self.store.create_job(check["name"], payload["target"], host, check)
        except PanioError as err:  # a reporting host's recorder did not answer: the check did not start
            held = Busy(f"target {payload['target']}'s health check could not start: {err.message}", hint=err.hint,
                        target=payload["target"])
            return {"job_id": None, "health": "incomplete", "result": "skipped", "reason": held.message, "held": held}
        self.store.take(check["job_id"], self.worker, 0.0)
        self.store.claim(check["job_id"], self.worker, fence=lease.token)
        self.progress("health_check", {"job_id": check["job_id"], "target": payload["target"], "why": why})
        self.heartbeat.add(check["job_id"])
        try:
            sub = JobRunner(self.store, self.leases, self.worker, _health_progress(self.progress), self.heartbeat,
                            self.caller, self.planner)
            return sub._steps(check, lease, call)
        finally:
            self.heartbeat.discard(check["job_id"])

    def _steps(self, payload: dict, lease: leasing.Lease, call: Call) -> dict:
        job_id, steps = payload["job_id"], payload["steps"]
        deadline = time.monotonic() + payload["timeout_s"] if payload.get("timeout_s") else None
        left_s = _deadline_left_s(payload)
        if left_s is not None and (deadline is None or time.monotonic() + left_s < deadline):
            deadline = time.monotonic() + left_s
        variables = known_variables(job_id, payload["target"])
        failed: list[str] = []
        began = {"job_started_at": time.time()}
        began["previous_step_started_at"] = began["job_started_at"]
        # A finished step's record is written with the next step's start, the skipped steps or the verdict,
        # whichever comes first: one commit per step, not two. ``done`` holds it until then.
        done: list[tuple[int, dict]] = []
        try:
            for idx, step in enumerate(steps):
                command = command_line(step, variables)
                stop = self._stop_reason(job_id, lease, deadline)
                # Recorded as running before it starts (unless canceled): if this worker dies now, the step
                # still shows, as an error.
                if stop is None and not self._start(job_id, idx, step["name"], command, done):
                    stop = _canceled()
                if stop:
                    return self._abort(payload, idx, variables, *stop, done=done)
                started = time.time()
                outcome, record = self._one_step(payload, idx, step, command, variables, lease, call, deadline,
                                                 dict(began))
                done.append((idx, {**record, "started_at": started}))
                began["previous_step_started_at"] = started
                if outcome["status"] == "pass":
                    variables.update(outcome["captured"])
                    continue
                if outcome["status"] == "fail":
                    failed.append(step["name"])
                    if step.get("continue_on_failure"):
                        continue
                    self._skip_rest(job_id, steps, idx + 1, variables, done)
                    break
                self._skip_rest(job_id, steps, idx + 1, variables, done)
                health, reason, error = outcome["health"]
                return self._finish(payload, health, None, reason, error)
            if failed:
                return self._finish(payload, "complete", "failed", f"failed: {', '.join(failed)}", done=done)
            return self._finish(payload, "complete", "passed", "all steps passed", done=done)
        finally:
            if done:  # the runner failed (a bug, a database away): record what finished if the database lets us;
                with contextlib.suppress(Exception):  # the error the job reports is the one that stopped it
                    self.store.record_steps(job_id, done)

    def _start(self, job_id: int, idx: int, name: str, command: str, done: list[tuple[int, dict]]) -> bool:
        """Write the ``done`` records and step ``idx`` as running, unless the job was canceled (False)."""
        started = self.store.start_step(job_id, idx, {"name": name, "command": command, "status": "running",
                                                      "started_at": time.time()}, done)
        done.clear()
        return started

    def _stop_reason(self, job_id: int, lease: leasing.Lease, deadline: float | None) -> tuple | None:
        """Why the job stops before its next step: a cancel, else the deadline, else a lost lease. The cancel
        is read here only when the job stops anyway; otherwise with the step's start (``_start``)."""
        timed_out = lambda: deadline is not None and time.monotonic() >= deadline  # noqa: E731
        why = None
        if timed_out():
            why = ("timed_out", "job timeout reached", Timeout("job timed out").to_json())
        else:
            # Redis restarting (its data kept) is not a lost lease while its TTL may hold it (issue 43); the job's
            # cancel and its deadline end that wait (read every CANCEL_POLL_S), not only the lease's TTL
            canceled = _Polled(lambda: self._cancel_read(job_id), CANCEL_POLL_S)
            try:
                lease.riding_out(lambda: lease.check(GRANT_FRESH_S), _waits(), lambda: timed_out() or canceled())
            except (Refused, Unreachable) as err:
                if canceled.said:
                    return _canceled()
                why = (("timed_out", "job timeout reached while waiting for the lease store",
                        Timeout("job timed out").to_json()) if timed_out()
                       else ("incomplete", f"lease lost: {err.message}", err.to_json()))
        if why is not None and self.store.cancel_requested(job_id):
            return _canceled()
        return why

    def _cancel_read(self, job_id: int) -> bool:
        """Whether the job's cancel was requested; False while the results database is away (read again later)."""
        try:
            return bool(self.store.cancel_requested(job_id))
        except Exception as exc:
            if outage.service_down(exc) is None:
                raise
            return False

    def _retaken(self, job_id: int, lease: leasing.Lease) -> None:
        """Redis lost the job's lease and it was retaken (``Lease._retake``): the job's row names its new token."""
        self.store.set_fence(job_id, lease.token)
        self.progress("lease_retaken", {"job_id": job_id, "target": lease.target, "token": lease.token})

    def _abort(self, payload: dict, idx: int, variables: dict, health: str, reason: str, error: dict,
               done: list[tuple[int, dict]]) -> dict:
        self._skip_rest(payload["job_id"], payload["steps"], idx, variables, done)
        return self._finish(payload, health, None, reason, error)

    def _one_step(self, payload: dict, idx: int, step: dict, command: str, variables: dict, lease: leasing.Lease,
                  call: Call, deadline: float | None, began: dict[str, float]) -> tuple[dict, dict]:
        """Run a step recorded as running; its outcome and its record (the caller writes it)."""
        from bench_agent import commands

        job_id = payload["job_id"]
        self.progress("step_start", {"idx": idx, "name": step["name"], "command": command, "count": len(payload["steps"])})
        timeout_s = step["timeout_s"]
        if deadline is not None:
            timeout_s = max(0.0, min(timeout_s, deadline - time.monotonic()))
        start = time.monotonic()
        out = commands.Recorder(lambda line: self.progress("output", {"idx": idx, "line": line}), OUTPUT_LIMIT)

        road = lambda: self.caller(payload["target"], leasing.Presented(lease), self.leases)  # noqa: E731 - the watch's own
        watch = lab_probe.PowerWatch.start(road, payload, idx)
        step_call = watch.noting(call) if watch else call

        def body() -> None:
            run = planned(payload["target"], step.get("run") or {}, variables, self.planner)
            step["run"] = run  # a deferred step's kind (``steps.kind``) is known once it is planned
            commands.run(run["op"], step_call, bind(run, variables), out, began)

        try:
            code, why = execute(body, out, timeout_s, lambda: self._interrupt(job_id, lease))
        finally:
            seen_off = watch.stop() if watch else None
        record = {"name": step["name"], "command": command, "exit_status": code,
                  "duration_s": round(time.monotonic() - start, 3), "output": out.text, "checks": [], "captured": {}}
        outcome = self._classify(step, record, why, variables, deadline, out.last_error)
        if outcome["status"] in ("fail", "timeout"):
            outcome = self._ask_the_lab(payload, idx, record, outcome, call, seen_off, began["job_started_at"])
        screens.keep(self.store, job_id, idx, step, record["status"], payload, call)
        self.progress("step_end", {"idx": idx, **record})
        return outcome, record

    def _ask_the_lab(self, payload: dict, idx: int, record: dict, outcome: dict, call: Call,
                     seen_off: str | None = None, job_started_at: float | None = None) -> dict:
        """A step failed or timed out: if the lab is at fault (power, capture, host), or the target's power was
        seen off while the step ran, the lab failed, not the board."""
        steps = payload["steps"]
        used_serial = any(map(reads_console, steps[:idx + 1]))
        found = lab_probe.faults(call, payload["target"], payload.get("target_config") or {}, used_serial,
                                 lab_probe.expects_off(steps, idx), seen_off,
                                 since=job_started_at, boots_expected=lab_probe.boots_expected(steps, idx))
        if not found:
            return outcome
        first = found[0]
        record["status"] = "error"
        record["checks"] = record["checks"] + [{"check": f"lab: {f['what']}", "ok": False, "got": f["message"],
                                                "error": f} for f in found]
        err = {"error": first["error"], "exit": first["exit"], "message": first["message"],
               "hint": "the step's failure is the lab's; fix the lab and run the job again"}
        reason = (f"step {record['name']!r} {'timed out' if outcome['status'] == 'timeout' else 'failed'}, "
                  f"and the lab is at fault: {'; '.join(f['message'] for f in found)}")
        return {"status": "error", "health": ("incomplete", reason, err)}

    def _interrupt(self, job_id: int, lease: leasing.Lease) -> str | None:
        if lease.lost:
            return "lease_lost"
        return "canceled" if self.store.cancel_requested(job_id) else None

    def _classify(self, step: dict, record: dict, why: str | None, variables: dict, deadline: float | None,
                  error: PanioError | None) -> dict:
        if why is not None:
            record["status"] = "timeout" if why == "timeout" else "error"
            record["checks"] = [{"check": "finished", "ok": False, "got": why, "outcome": "unknown"}]
            job_timeout = deadline is not None and time.monotonic() >= deadline - 0.05
            what = "job timeout (or the run's deadline)" if job_timeout else f"step timeout ({step['timeout_s']:g} s)"
            health = {
                "timeout": ("timed_out", f"step {step['name']!r}: {what}; its outcome is unknown",
                            Timeout(what).to_json()),
                "canceled": ("canceled", f"canceled during step {step['name']!r}",
                             Canceled("canceled").to_json()),
                "lease_lost": ("incomplete", f"lease lost during step {step['name']!r}",
                               Refused("lease lost").to_json()),
            }[why]
            return {"status": record["status"], "health": health}
        code = record["exit_status"]
        if code not in step.get("expect_exit", [0]) and error is not None and error.lab_fault:
            err = error.to_json()
            record["status"] = "error"
            record["checks"] = [{"check": "lab", "ok": False, "got": code, "error": err}]
            unknown = " (the outcome of its side effects is unknown)" if error.outcome_unknown else ""
            return {"status": "error", "health": ("incomplete", f"step {step['name']!r}: lab failure: "
                                                  f"{err.get('message', code)}{unknown}", err)}
        checks, captured = judge(step, code, record["output"], variables)
        record.update(checks=checks, captured=captured, status="pass" if all(c["ok"] for c in checks) else "fail")
        return {"status": record["status"], "captured": captured}

    def _skip_rest(self, job_id: int, steps: list[dict], start: int, variables: dict,
                   done: list[tuple[int, dict]] | None = None) -> None:
        """Record steps ``start``.. as skipped, after the ``done`` records, in one transaction."""
        # shown as it would have run: ${target} filled, like the steps that ran
        skipped = [(idx, {"name": steps[idx]["name"], "command": command_line(steps[idx], variables),
                          "status": "skipped"}) for idx in range(start, len(steps))]
        self.store.record_steps(job_id, [*(done or []), *skipped])
        if done:
            done.clear()

    def _serial_log(self, payload: dict) -> list[tuple[str, str]]:
        """The job's serial-log artifacts (``serial_window``), read once: with the verdict, or after it when the
        target's health check runs after the job (its output belongs to the job's log)."""
        if self._window is None:
            return []
        marks, credential = self._window
        # a road of its own: a step stopped at its deadline may still hold the steps' connection
        found = serial_window.artifacts(payload, marks, self.caller(payload["target"], credential, self.leases))
        self._window = None
        return found

    def _finish(self, payload: dict, health: str, result: str | None, reason: str, error: dict | None = None,
                gated: bool = False, done: list[tuple[int, dict]] | None = None) -> dict:
        artifacts: list[tuple[str, str]] = []
        if not (health == "incomplete" and payload.get("health_check")):
            # a failure to read it is raised by ``_run``'s own read, after the verdict, as before
            with contextlib.suppress(Exception):
                artifacts = self._serial_log(payload)
        self.store.finish(payload["job_id"], health, result, reason, error, steps=done or (), artifacts=artifacts)
        if done:
            done.clear()
        summary = {"job_id": payload["job_id"], "health": health, "result": result, "reason": reason, "error": error}
        self.progress("job_end", summary)
        self._after(payload, {**summary, "gated": gated})
        return summary

    def _after(self, payload: dict, summary: dict) -> None:
        """What the verdict says about the target (its health) and who is told (notifications). The verdict is
        recorded already: a failure here is reported on the job's progress, never raised into the runner."""
        from bench_agent.jobs import notify

        try:
            self._gate().after(payload, summary, self.store)  # a later job may speak for the target (gate.after_incomplete)
        except Exception as exc:  # noqa: BLE001 - a health write failing must not turn a verdict into a crash
            self.progress("health_error", {"job_id": summary["job_id"], "message": f"{type(exc).__name__}: {exc}"})
        notify.job_ended(payload, summary, self._notice)

    def _notice(self, configs: list[dict] | None, event: str, data: dict) -> None:
        """Hold the job's end notifications until its serial log is stored (a failure's carries its triage)."""
        from bench_agent.jobs import notify

        if self._held is not None:
            self._held.append((configs, event, data))
        else:
            notify.send(configs, event, data)

    def _send_held(self) -> None:
        """The notifications of the job's end, with the triage summary of a failure (``triage.notice``)."""
        from bench_agent.jobs import notify
        from bench_agent.triage import compare as triage

        held, self._held = self._held or [], None
        for configs, event, data in held:
            if event == "job_failed" and notify.wanted(configs, event):
                if hasattr(self.store, "notice"):  # a reporting host: the recorder triages and sends it
                    self.store.notice(data["job_id"], event)
                    continue
                data.update(triage.notice(self.store, data["job_id"]))
            notify.send(configs, event, data)


CANCEL_POLL_S = 0.5  # how often a wait for the lease store between steps reads the job's cancel


class _Polled:
    """``read()``, at most once every ``every_s`` (the answer between reads is the last one); ``said``: it was
    True once."""

    def __init__(self, read: Callable[[], bool], every_s: float) -> None:
        self.read, self.every_s, self.at, self.said = read, every_s, None, False

    def __call__(self) -> bool:
        if not self.said and (self.at is None or time.monotonic() - self.at >= self.every_s):
            self.at, self.said = time.monotonic(), self.read()
        return self.said


def _canceled() -> tuple:
    return ("canceled", "canceled by request", Canceled("canceled").to_json())


def _health_progress(progress: Progress) -> Progress:
    """A health check's events on its job's progress: its steps marked as the check's, its end as health_check_end."""
    def emit(event: str, data: dict[str, Any]) -> None:
        if event in ("step_start", "step_end"):
            progress(event, {**data, "name": f"[health check] {data['name']}"})
        elif event == "job_end":
            progress("health_check_end", data)
        elif event != "job_start":
            progress(event, data)
    return emit

