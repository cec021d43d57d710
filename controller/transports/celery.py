"""CeleryTransport: operations through the host's own Celery worker (queue ``host.<name>``).

For hosts that are reached through the broker rather than SSH (``transport =
"celery"`` in the host's table). The reply comes back through the Redis
result backend; an operation's error travels as data and is raised again here.
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench_agent.errors import Unreachable, from_json

DEFAULT_WAIT_S = 60.0


class CeleryTransport:
    def __init__(self, host: str) -> None:
        from controller.jobs.remote import celery_app

        self.host = host
        self.app = celery_app()

    def call(self, request: dict[str, Any]) -> Any:
        from bench_agent.worker import OP_TASK, queue_name

        args = request.get("args", {})
        # How long to wait for a worker beyond the operation's own timeout (PANIO_OP_WAIT_S).
        wait_s = float(args.get("timeout_s", 0) or 0) + float(os.environ.get("PANIO_OP_WAIT_S", DEFAULT_WAIT_S))
        try:
            task_id = self.app.send_task(OP_TASK, args=[request["op"], args], queue=queue_name(self.host)).id
            reply = self._wait(task_id, wait_s)
        except Exception as exc:  # celery/kombu/redis errors end here, translated
            raise Unreachable(f"host {self.host}: no answer from its worker on {queue_name(self.host)} "
                              f"({type(exc).__name__}: {exc}); the outcome of the operation is unknown",
                              hint=f"is `panio worker --host {self.host}` running?", host=self.host,
                              outcome="unknown") from None
        if reply.get("ok"):
            return reply.get("result")
        raise from_json(reply.get("error") or {})

    def _wait(self, task_id: str, wait_s: float) -> dict:
        """Poll the result key (no pub/sub subscription left behind to trip at interpreter exit)."""
        deadline, pause = time.monotonic() + wait_s, 0.0005
        while True:
            meta = self.app.backend.get_task_meta(task_id)
            if meta["status"] == "SUCCESS":
                self.app.backend.forget(task_id)
                return meta["result"]
            if meta["status"] in ("FAILURE", "REVOKED"):
                raise RuntimeError(f"task {meta['status'].lower()}: {meta.get('result')}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no reply within {wait_s:g} s")
            time.sleep(pause)
            pause = min(pause * 1.5, 0.02)

    def close(self) -> None:
        pass
