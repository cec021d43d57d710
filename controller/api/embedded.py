"""The controller runs the jobs submitted to its API itself when there is no broker (the embedded default).

One thread a target, started on its first job: a target's jobs run one after the other, in the order they
came, so however many jobs a submitter sends, the controller's process holds at most one runner thread per
target of its lab (a thread a job let one token start thousands). Each job is held by this process from the
moment it is accepted (taken, and beaten by one heartbeat), as `panio suite run` holds its own: should the
process die, a reader (`panio job status`, the dashboard) sees its holder gone and settles the job, instead
of leaving it queued for a runner that will never come.
"""

from __future__ import annotations

import queue
import threading

from controller import backends

_RUNNER: list[Embedded] = []
_RUNNER_LOCK = threading.Lock()


def runner() -> Embedded:
    """This process's runner (made on first use: nothing starts on import)."""
    with _RUNNER_LOCK:
        if not _RUNNER:
            _RUNNER.append(Embedded())
        return _RUNNER[0]


class Embedded:
    def __init__(self) -> None:
        from bench_agent.leases.base import holder_name

        self.me = holder_name("panio dashboard")
        self._queues: dict[tuple[str, str], queue.SimpleQueue] = {}
        self._lock = threading.Lock()
        self._heartbeat = None

    def run(self, store, lab, payloads: list[dict]) -> None:
        """Hold ``payloads`` (recorded, queued) for this process and queue each to its target's thread."""
        from bench_agent.jobs.reconcile import Heartbeat

        with self._lock:
            if self._heartbeat is None:
                self._heartbeat = Heartbeat(store)
            for payload in payloads:
                store.take(payload["job_id"], self.me, 0.0)
                self._heartbeat.add(payload["job_id"])
                self._queue(lab.key, payload["target"]).put((store, lab, payload))

    def _queue(self, lab_key: str, target: str) -> queue.SimpleQueue:
        key = (lab_key, target)
        if key not in self._queues:
            self._queues[key] = queue.SimpleQueue()
            threading.Thread(target=self._drain, args=(self._queues[key],), name=f"panio-target-{target}",
                             daemon=True).start()
        return self._queues[key]

    def _drain(self, jobs: queue.SimpleQueue) -> None:
        while True:
            self._one(*jobs.get())

    def _one(self, store, lab, payload: dict) -> None:
        from bench_agent.jobs.runner import JobRunner
        from controller.jobs import local, spec

        job_runner = JobRunner(store, backends.lease_store(lab.key), self.me, lambda e, d: None, self._heartbeat,
                               local.dispatch_caller(lab), spec.planner(lab))
        try:
            job_runner.run(payload)
        except Exception as exc:  # noqa: BLE001 - the verdict is the record; the target's next job must still run
            store.finish(payload["job_id"], "incomplete", None, f"the controller's runner failed: {exc}",
                         {"error": "internal", "exit": 70, "message": str(exc)})
        finally:
            self._heartbeat.discard(payload["job_id"])
