"""ReportingStore: the job runner's store on a control host that holds no results-database URL.

It has the methods the runner, the health gate and the heartbeat call on ``ResultStore``, and turns each
write into a signed report on the host's stream (``bench_agent.results.reports``), which the controller's
recorder checks and records (docs/security.md, "Hosts report, the controller records"). What needs an answer
is answered here, without the database:

* take and claim: the host's own record of the jobs it started (``bench_agent.jobs.started``, the folder
  ``STATE/worker-HOST/jobs-started/`` whose message records its intake checks, pruned with them): ``N.taken``
  while its runner waits for the lease, ``N.started`` (made with ``O_EXCL``: one runner among all the host's
  workers, and a restarted worker remembers it) once claimed, ``N.done`` at its verdict. A job is claimed once,
  whatever the broker delivers; the claim is reported as ``started`` with its fence;
* a cancel: the controller sets ``PREFIX cancel:N`` in Redis when someone asks;
* the fencing marks: ``fences.db`` in the same folder (``FenceStore`` on a private SQLite file);
* the target's health: ``PREFIX health:TARGET``, the record the recorder publishes (``ReportedHealth``).

A health check the runner makes a job of its own needs a job id, which only the controller gives: the host
reports ``check`` under the job it holds the lease for (its fencing token), and the recorder makes the check's
job (for that host, that target, claimed under that token) and answers with its id at ``PREFIX check:HOST:SEQ``;
the runner waits up to ``CHECK_WAIT_S`` for it (``create_job``). A take is reported too (``taken``, with the
runner's beats while it waits for its lease), so the controller's reconciler sees who holds a queued job. A
failed job's notification is sent by the recorder (``notice``), with the triage only the controller can make.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bench_agent.results import reports

CHECK_WAIT_S = 60.0  # how long a runner waits for the recorder to give its health check a job id
CHECK_POLL_S = 0.05


class ReportingStore:
    """Reports a host's job writes to the controller (``reports``); answers claims and cancels on the host."""

    url = None  # no results database here

    def __init__(self, host: str, redis_url: str, prefix: str, folder: Path, key_path: Path, fences=None) -> None:
        import redis

        from bench_agent.jobs.started import StartedJobs
        from bench_agent.private import private_dir

        self.host, self.prefix, self.fences = host, prefix, fences  # fences: the host's own ``FenceStore``
        self.jobs = StartedJobs(Path(private_dir(folder)) / "jobs-started")  # the worker's record (intake) too
        self.r = redis.Redis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)
        self._signer = reports.Signer(key_path)
        self._seq = reports.Sequence()
        self._fences: dict[int, int] = {}  # job -> the fencing token its reports carry
        self.health = ReportedHealth(self)

    # --- the reports ---------------------------------------------------

    def _report(self, kind: str, job: int | None, data: dict[str, Any]) -> int:
        """Append one signed report to the host's stream (riding out a Redis restart of a few seconds); its
        sequence number."""
        import redis

        with self._seq.lock:  # numbered in the order they are appended
            seq = self._seq.next()
            body = reports.body(self.host, job, seq, kind, self._fences.get(job), data)
            entry = {"body": body, "sig": self._signer.sign(body)}
            for attempt in range(50):
                try:
                    self.r.xadd(reports.stream(self.prefix, self.host), entry)
                    return seq
                except (redis.ConnectionError, redis.TimeoutError):
                    if attempt == 49:
                        raise
                    time.sleep(0.2)

    # --- what the host decides on its own --------------------------------

    def state(self, job_id: int) -> str | None:
        """queued (or waiting for its lease), running, or done, as this host knows it."""
        if self.jobs.marked(job_id, "done"):
            return "done"
        return "running" if self.jobs.marked(job_id, "started") else "queued"

    def take(self, job_id: int, worker: str, stale_before: float) -> bool:
        """Hold the job for this host's runner, unless it started (here) or someone asked to cancel it."""
        if self.state(job_id) != "queued" or self.cancel_requested(job_id):
            return False
        self.jobs.mark(job_id, "taken")
        self._report("taken", job_id, {"worker": worker})  # who holds it, for the controller's reconciler
        return True

    def take_reading_health(self, job_id: int, worker: str, stale_before: float,
                            target: str) -> tuple[bool, dict | None]:
        return self.take(job_id, worker, stale_before), None

    def still_queued(self, job_id: int) -> bool:
        return self.state(job_id) == "queued" and not self.cancel_requested(job_id)

    def cancel_requested(self, job_id: int) -> bool:
        return bool(self.r.exists(reports.cancel_key(self.prefix, job_id)))

    def claim(self, job_id: int, worker: str, fence: int | None = None) -> bool:
        """Queued -> running, once on this host (``O_EXCL``); reported as ``started`` with the lease's token."""
        if self.cancel_requested(job_id):
            return False
        if not self.jobs.mark(job_id, "started", exclusive=True):
            return False
        self._fences[job_id] = None if fence is None else int(fence)
        self._report("started", job_id, {"worker": worker})
        return True

    def claim_fenced(self, job_id: int, worker: str, target: str, fence: int) -> tuple[bool, bool]:
        """Raise the host's own mark for ``target`` (``fences.db``) to ``fence``, and only then claim the job."""
        if self.fences is not None and not self.fences.claim(target, fence):
            return False, False
        return True, self.claim(job_id, worker, fence)

    def set_fence(self, job_id: int, fence: int) -> None:
        """The job's lease was retaken under a new token (Redis lost it): reported under the old one."""
        self._report("fence", job_id, {"token": int(fence)})
        self._fences[job_id] = int(fence)

    def create_job(self, name: str, target: str, host: str | None, spec: dict) -> int:
        """A health check's job (``spec["check_of"]``: the job whose lease it runs under): reported as ``check``
        under that job's fencing token; the recorder makes the job and answers with its id (``reports.check_key``).
        ``Unreachable`` when no answer comes within ``CHECK_WAIT_S`` (the recorder is down: nothing ran)."""
        from bench_agent.errors import NotConfigured, Unreachable

        parent = spec.get("check_of")
        if spec.get("kind") != "health_check" or parent not in self._fences:
            raise NotConfigured(f"a worker without a results database makes no job of its own ({name!r} on {target})",
                                hint="queue it from the controller (`panio job submit`)")
        seq = self._report("check", parent, {"name": name, "target": target, "spec": spec})
        key, end = reports.check_key(self.prefix, self.host, seq), time.monotonic() + CHECK_WAIT_S
        while time.monotonic() < end:
            found = self.r.get(key)
            if found is not None:  # (read-only to the host: it expires)
                return int(found)
            time.sleep(CHECK_POLL_S)
        raise Unreachable(f"target {target}'s health check got no job id from the controller's recorder within "
                          f"{CHECK_WAIT_S:g} s", hint="is `panio recorder` running on the controller?")

    # --- the writes, reported ------------------------------------------

    def start_step(self, job_id: int, idx: int, step: dict, done: list[tuple[int, dict]] = ()) -> bool:
        """Report ``done`` and step ``idx`` as running, unless the job was canceled (then only ``done``)."""
        if self.cancel_requested(job_id):
            self.record_steps(job_id, list(done))
            return False
        self._report("step_start", job_id, {"idx": idx, "step": step, "done": [[i, s] for i, s in done]})
        return True

    def record_step(self, job_id: int, idx: int, step: dict) -> None:
        self.record_steps(job_id, [(idx, step)])

    def record_steps(self, job_id: int, steps: list[tuple[int, dict]]) -> None:
        if steps:
            self._report("steps", job_id, {"steps": [[i, s] for i, s in steps]})

    def add_artifact(self, job_id: int, name: str, content: str | bytes) -> None:
        self._report("artifact", job_id, {"artifacts": [_artifact(name, content)]})

    def finish(self, job_id: int, health: str, result: str | None, reason: str = "", error: dict | None = None,
               only_if_running: bool = False, only_if_queued: bool = False,
               steps: list[tuple[int, dict]] = (), artifacts: list[tuple[str, str]] = ()) -> bool:
        """The verdict, reported; True if this host had the job in the state ``only_if_*`` asks (the recorder
        checks again against the job's row)."""
        state = self.state(job_id)
        if (only_if_running and state != "running") or (only_if_queued and state != "queued") or state == "done":
            return False
        self.jobs.mark(job_id, "done")
        self._report("finish", job_id, {
            "health": health, "result": result, "reason": reason, "error": error, "only_if_running": only_if_running,
            "only_if_queued": only_if_queued, "steps": [[i, s] for i, s in steps],
            "artifacts": [_artifact(n, c) for n, c in artifacts]})
        return True

    def beat(self, job_ids: list[int]) -> None:
        for job_id in job_ids:
            self._report("beat", job_id, {})

    def notice(self, job_id: int, event: str) -> None:
        """Ask the recorder to send the job's ``event`` notification (``job_failed``): it carries the failure's
        triage, which reads the job's history, the controller's alone; the channels are the ones the controller
        compiled into the job, never the host's word."""
        self._report("notify", job_id, {"event": event})

    # --- reads a runner makes after its verdict --------------------------

    def job(self, job_id: int) -> dict:
        return {"id": job_id}

    def later_job_started(self, job: dict) -> bool:
        """Decided by the recorder (it reads the job rows) when it records the health change."""
        return False


class ReportedHealth:
    """The health gate's store on a reporting host: reads what the recorder published, reports changes."""

    def __init__(self, store: ReportingStore) -> None:
        self.store = store

    def get(self, target: str) -> dict[str, Any]:
        from bench_agent.results.db import health_record

        raw = self.store.r.get(reports.health_key(self.store.prefix, target))
        try:
            found = json.loads(raw) if raw else None
        except ValueError:
            found = None
        return health_record(target, found if isinstance(found, dict) else None)

    def set(self, target: str, health: str, reason: str, set_by: str, job_id: int | None = None,
            checked: bool = False, **auto) -> tuple[str, dict[str, Any]]:
        previous = self.get(target)
        self.store._report("health", job_id, {"target": target, "health": health, "reason": reason,
                                              "checked": checked, "auto": auto})
        return previous["health"], {**previous, "health": health, "reason": reason, "set_by": set_by,
                                    "job_id": job_id}

    def postpone(self, target: str, reason: str, recheck_at: float) -> bool:
        if self.get(target)["health"] != "bad":
            return False
        self.store._report("health_postpone", None, {"target": target, "reason": reason, "recheck_at": recheck_at})
        return True


def _artifact(name: str, content: str | bytes) -> dict[str, Any]:
    import base64

    if isinstance(content, bytes):
        return {"name": name, "b64": base64.b64encode(content).decode()}
    return {"name": name, "text": content}
