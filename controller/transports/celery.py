"""CeleryTransport: operations through the host's own Celery worker (queue ``host.<name>.ops``).

Operations have a queue of their own, which the worker serves apart from its job pool
(``bench_agent.jobs.op_server``), so a command never waits behind the host's running jobs.

For hosts that are reached through the broker rather than SSH (``transport =
"celery"`` in the host's table). The reply comes back through the Redis
result backend; an operation's error travels as data and is raised again here.

How long to wait: the operation's own deadline (``deadline_s`` in the
request, from its spec: a serial wait's ``timeout_ms``, an action's
``timeout_s``, a power hook's timeout) plus a margin for the queue and the
worker (``PANIO_OP_WAIT_S``, default 60 s). An operation without a bound of its
own waits the margin alone.
"""

from __future__ import annotations

import os
from typing import Any

from bench_agent.errors import Refused, Unreachable, unwrap

DEFAULT_MARGIN_S = 60.0


def wait_s(request: dict[str, Any]) -> float:
    """The operation's deadline plus the margin for the queue and the worker."""
    margin_s = float(os.environ.get("PANIO_OP_WAIT_S", DEFAULT_MARGIN_S))
    return float(request.get("deadline_s") or 0) + margin_s


class CeleryTransport:
    def __init__(self, host: str) -> None:
        from bench_agent.jobs.worker import for_host
        from controller.backends import celery_app

        self.host = host
        self.app = for_host(celery_app(), host)  # its replies too come back under the host's own keys

    def call(self, request: dict[str, Any]) -> Any:
        from bench_agent.jobs.op_server import ops_queue_name as queue_name
        from bench_agent.jobs.worker import OP_TASK, op_message

        pending, failure, reply = None, None, {}
        waited_s = wait_s(request)
        try:
            pending = self.app.send_task(OP_TASK, args=op_message(request["op"], request.get("args", {}), waited_s,
                                                                   self.host),
                                         queue=queue_name(self.host))
            reply = pending.get(timeout=waited_s, propagate=True)
        except Exception as exc:  # celery/kombu/redis errors end here, translated
            failure = f"{type(exc).__name__}: {exc}"
        else:
            _forget(pending)
        if failure is not None:
            _abandon(pending)
            raise Unreachable(f"host {self.host}: no answer from its worker on {queue_name(self.host)} "
                              f"within {waited_s:g} s ({failure})",
                              hint=f"is `panio worker --host {self.host}` running?", host=self.host)
        return unwrap(reply)

    def interactive(self, request: dict[str, Any]) -> Any:
        raise Refused(f"host {self.host} is reached through its Celery worker, which carries requests and replies, "
                      f"not the byte stream {request['op']} needs",
                      hint=f"give host {self.host} an `ssh` address (and drop transport = \"celery\"), "
                           "or run the command on the host itself", host=self.host, op=request["op"])

    def close(self) -> None:
        pass


def _forget(pending) -> None:
    """Delete the reply we read from the result backend: left there, every operation over Celery kept a key in
    Redis for ``result_expires`` (300 s), which at a lab's rate of operations is memory for nothing (issue 25).
    A failed delete is not an error: the key still expires on its own."""
    try:
        pending.forget()
    except Exception:  # noqa: BLE001, S110 - documented above: the key expires anyway
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
