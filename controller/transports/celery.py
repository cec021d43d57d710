"""CeleryTransport: operations through the host's own Celery worker (queue ``host.<name>``).

For hosts that are reached through the broker rather than SSH (``transport =
"celery"`` in the host's table). The reply comes back through the Redis
result backend; an operation's error travels as data and is raised again here.
"""

from __future__ import annotations

import os
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
        pending, failure, reply = None, None, {}
        try:
            pending = self.app.send_task(OP_TASK, args=[request["op"], args], queue=queue_name(self.host))
            reply = pending.get(timeout=wait_s, propagate=True)
        except Exception as exc:  # celery/kombu/redis errors end here, translated
            failure = f"{type(exc).__name__}: {exc}"
        if failure is not None:
            _abandon(pending)
            raise Unreachable(f"host {self.host}: no answer from its worker on {queue_name(self.host)} ({failure}); "
                              "the outcome of the operation is unknown",
                              hint=f"is `panio worker --host {self.host}` running?", host=self.host, outcome="unknown")
        if reply.get("ok"):
            return reply.get("result")
        raise from_json(reply.get("error") or {})

    def close(self) -> None:
        pass


def _abandon(pending) -> None:
    """Unsubscribe from a result we gave up on now; left to ``__del__`` it would run at interpreter exit and fail."""
    if pending is None:
        return
    try:
        pending.backend.remove_pending_result(pending)
    except Exception:  # noqa: BLE001 - best effort: the broker may be the thing that is down
        pass
    pending.backend = None
