"""A worker's operations, served beside its jobs, never behind them.

A ``panio.op`` (an operator's ``panio serial stop --override``, the scheduler asking the lab before a
re-check, ``panio power-state`` on a celery host) used to wait in the host's job queue for a free pool
thread. With every thread running a job or waiting for a target's lease, it ran only once a job ended: an
override meant for a running job landed after it (the compressed night never stopped a capture under a job),
and a lab probe waited a job's length. So operations have a queue of their own (``host.<name>.ops``), consumed
by one thread of the worker apart from its pool, each operation run on a small thread pool of its own
(``OP_THREADS``; a ``serial wait`` may last minutes). The messages are Celery's own ``panio.op`` task messages,
signed and checked as before (the consumer accepts only what the app accepts; ``check_fresh`` runs each once,
in its window); the reply goes to the result backend, where the caller's ``AsyncResult`` waits for it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

OP_THREADS = 4
RECONNECT_S = 1.0


def ops_queue_name(host: str) -> str:
    return f"host.{host}.ops"


def start(app: Any, host: str, call_op: Callable[[str, dict, Any], dict], log: Callable[..., None]) -> threading.Thread:
    """Consume ``host``'s operation queue in a daemon thread for the worker's life."""
    pool = ThreadPoolExecutor(max_workers=OP_THREADS, thread_name_prefix="panio-op")
    thread = threading.Thread(target=_serve, args=(app, host, call_op, pool, log), name="panio-ops", daemon=True)
    thread.start()
    return thread


def _serve(app: Any, host: str, call_op, pool: ThreadPoolExecutor, log) -> None:
    from kombu import Consumer, Exchange, Queue

    name = ops_queue_name(host)
    queue = Queue(name, Exchange(name), routing_key=name)

    from bench_agent.jobs.intake import accepts, refused, unwanted

    accepted = accepts(app)

    def on_message(message: Any) -> None:
        message.ack()  # run at most once (as the pool's ``acks_late=False`` op task was)
        why = unwanted(message, accepted)  # kombu would decode application/text unverified
        if why:
            refused(message, why)
            return
        try:
            body = message.decode()  # verified: only what the app accepts (signed by a trusted key)
        except Exception as exc:  # noqa: BLE001 - dropped, and said, as Celery's own consumer does
            refused(message, exc)
            return
        pool.submit(_run, app, message.headers or {}, body, call_op, log)

    while True:
        try:
            with app.connection_for_read() as conn, Consumer(conn, [queue], on_message=on_message,
                                                             accept=app.conf.accept_content, prefetch_count=OP_THREADS):
                while True:
                    try:
                        conn.drain_events(timeout=1.0)
                    except TimeoutError:
                        pass
        except Exception as exc:  # noqa: BLE001 - the broker went away (a restart): connect again
            log("operations queue %s: %s: %s; reconnecting", name, type(exc).__name__, exc)
            time.sleep(RECONNECT_S)


def _run(app: Any, headers: dict, body: Any, call_op, log) -> None:
    from celery import states

    from bench_agent.errors import InternalError

    task_id = headers.get("id")
    try:
        args = list(body[0]) if isinstance(body, (list, tuple)) and body else []
        reply = call_op(*(args + [None] * 3)[:3])  # (op, args, stamp): a message without its stamp is refused there
    except Exception as exc:  # noqa: BLE001 - a malformed message: answered as an error, never a hang
        log("operation %s failed: %s: %s", task_id, type(exc).__name__, exc)
        reply = {"ok": False, "error": InternalError(f"{type(exc).__name__}: {exc}").to_json()}
    if task_id:
        app.backend.store_result(task_id, reply, states.SUCCESS)
