"""The bench worker of one control host: a Celery worker on queue ``host.<name>``.

Configured for hardware, not throughput:

* JSON only (``task_serializer``, ``accept_content``): a payload is plain data, never pickle;
* prefetch 1 and ``acks_late``: a worker reserves no more than it can start;
* timeouts are enforced inside the task by the job runner (Celery's own time
  limits do not fire in the solo or thread pools);
* Redis redelivers an unacknowledged task after the visibility timeout, so a
  long job *will* be delivered twice: the results database's atomic claim
  (queued -> running) and the target's lease decide who runs it, never the ack.
  A redelivered copy finds the job taken and returns; if the job's worker
  died (its lease is gone), the copy marks the job incomplete.

The task writes the target's configuration (carried in the payload, host
removed) as a one-target lab file and runs each step as a local
``panio --lab <that file> ...``.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

TASK = "panio.run_job"
OP_TASK = "panio.op"
DEFAULT_VISIBILITY_S = 300


def queue_name(host: str) -> str:
    return f"host.{host}"


def make_app(broker_url: str, prefix: str = "panio:", visibility_timeout_s: float = DEFAULT_VISIBILITY_S):
    from celery import Celery

    app = Celery("panio", broker=broker_url, backend=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        worker_prefetch_multiplier=1, task_acks_late=True, task_ignore_result=True,
        task_reject_on_worker_lost=True, broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": visibility_timeout_s, "global_keyprefix": f"{prefix}celery:",
            # Sweep for tasks a dead worker left unacknowledged every third of the visibility timeout.
            "unacked_restore_interval": max(1, int(visibility_timeout_s / 3)), "unacked_restore_throttle": 1,
            # A worker killed inside a sweep leaves the sweep's mutex behind: let it expire in seconds, not 5 min.
            "unacked_mutex_expire": 10,
        },
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5},
        worker_hijack_root_logger=False, worker_send_task_events=False, result_expires=300,
        result_backend_transport_options={"global_keyprefix": f"{prefix}celery:"},
    )
    return app


class WorkerContext:
    """What a running worker needs to run a job: passed in by ``panio worker``, never read from a lab file."""

    def __init__(self, host: str, results_url: str, redis_url: str, prefix: str, state_dir: Path,
                 panio_argv: list[str]) -> None:
        self.host, self.results_url, self.redis_url, self.prefix = host, results_url, redis_url, prefix
        self.state_dir, self.panio_argv = Path(state_dir), panio_argv
        self._in_flight: set[int] = set()
        self._stores = None
        self._lock = threading.Lock()

    def write_lab(self, payload: dict) -> Path:
        import tomlkit

        config = {k: v for k, v in payload["target_config"].items() if k != "host"}
        for action in config.get("actions", {}).values():
            action.pop("host", None)
        labs = self.state_dir / "labs"
        labs.mkdir(parents=True, exist_ok=True)
        # One file per delivery: a redelivered copy of the task must never remove the file the running one uses.
        path = labs / f"job-{payload['job_id']}-{uuid.uuid4().hex[:8]}.toml"
        path.write_text(f"# written by panio worker {self.host} for job {payload['job_id']}\n"
                        + tomlkit.dumps({"targets": {payload["target"]: config}}), encoding="utf-8")
        return path

    def run_job(self, payload: dict) -> dict[str, Any] | None:
        # A redelivered copy of a job this process is already running (or waiting to lease) is dropped
        # at once instead of tying up a second pool thread.
        with self._lock:
            if payload["job_id"] in self._in_flight:
                return None
            self._in_flight.add(payload["job_id"])
        try:
            return self._run_job(payload)
        finally:
            with self._lock:
                self._in_flight.discard(payload["job_id"])

    def _run_job(self, payload: dict) -> dict[str, Any] | None:
        from bench_agent.jobs.runner import JobRunner, mark_lost
        from bench_agent.leases import RedisLeaseStore
        from bench_agent.results import ResultStore

        with self._lock:  # one database engine and one Redis client per worker, shared by its threads
            if self._stores is None:
                self._stores = (ResultStore(self.results_url), RedisLeaseStore(self.redis_url, self.prefix))
        store, leases = self._stores
        lab = self.write_lab(payload)
        worker = f"worker {self.host}@{socket.gethostname()}:{os.getpid()}"
        try:
            summary = JobRunner(store, leases, self.panio_argv, str(lab), worker, _log_event).run(payload)
        finally:
            lab.unlink(missing_ok=True)
        if summary is None:  # a redelivered copy: someone else has (or had) the job
            mark_lost(store, leases, store.job(payload["job_id"]))
        return summary


def _log_event(event: str, data: dict[str, Any]) -> None:
    """The worker's log: one line when a job starts, per step started and finished, and at its end."""
    from celery.utils.log import get_task_logger

    log = get_task_logger("panio.worker")
    if event == "job_start":
        log.info("job %s: leased %s, running", data["job_id"], data["target"])
    elif event == "step_start":
        log.info("job step start: %s/%s %s", data["idx"] + 1, data["count"], data["command"])
    elif event == "step_end":
        log.info("job step end: %s %s %s", data["idx"] + 1, data["status"], data["command"])
    elif event == "job_end":
        log.info("job %s: %s %s: %s", data["job_id"], data["health"], data["result"] or "", data["reason"])


def register_task(app, ctx: WorkerContext) -> None:
    @app.task(name=TASK, bind=True, acks_late=True)
    def run_job(self, payload: dict) -> dict[str, Any] | None:
        return ctx.run_job(payload)

    @app.task(name=OP_TASK, ignore_result=False, acks_late=False)
    def run_op(op: str, args: dict) -> dict[str, Any]:
        return call_op(op, args)


def call_op(op: str, args: dict) -> dict[str, Any]:
    """One operation for the Celery transport; errors travel as data, like over SSH."""
    from bench_agent import ops
    from bench_agent.errors import reply

    return reply(ops.call, op, args)


def run(ctx: WorkerContext, broker_url: str, concurrency: int, visibility_timeout_s: float) -> None:
    """Serve ``host.<name>`` until stopped (SIGTERM finishes the running jobs first)."""
    app = make_app(broker_url, ctx.prefix, visibility_timeout_s)
    register_task(app, ctx)
    app.worker_main([
        "worker", "-Q", queue_name(ctx.host), "-n", f"{ctx.host}.{os.getpid()}@{socket.gethostname()}",
        "--pool", "threads", "-c", str(concurrency), "--without-gossip", "--without-mingle",
        "--without-heartbeat", "--loglevel", "INFO",
    ])


def submit(app, payload: dict, host: str) -> str:
    """Queue ``payload`` for ``host``'s worker; returns the task id."""
    result = app.send_task(TASK, args=[payload], queue=queue_name(host), task_id=f"panio-job-{payload['job_id']}")
    return result.id
