"""The Celery app of the controller and the workers, and the one of each host when each host's keys have a
prefix of their own (``PANIO_BROKER_PER_HOST=1``). Apart from ``worker`` so the modules that publish
(``sealed``) and read the broker (``reconcile``) need not import the worker, which imports them."""

from __future__ import annotations

import os

from bench_agent.jobs import PER_HOST_ENV, celery_keyprefix

DEFAULT_VISIBILITY_S = 300
INTAKE = "bench_agent.jobs.intake:GuardedConsumer"  # Celery imports it in the worker only


def make_app(broker_url: str, prefix: str = "panio:", visibility_timeout_s: float = DEFAULT_VISIBILITY_S,
             insecure: bool = False, host: str | None = None):
    """The Celery app of the controller and the workers: messages signed with this process's keys
    (``signing.required``: none and not ``insecure`` is ``NotConfigured``). ``host``: the app of that host's own
    Celery keys when each host has its own (``PANIO_BROKER_PER_HOST``, ``for_host``)."""
    from celery import Celery

    from bench_agent.jobs import signing

    from bench_agent.jobs.kombu_redis import PATH as TRANSPORT

    app = Celery("panio", broker=broker_url, backend=broker_url, set_as_current=False)
    keyprefix = celery_keyprefix(prefix, host, per_host_keys())
    # Prefetch 1 with late acks: a worker reserves only the jobs it can start, so a job waits in the queue
    # (where any worker can take it), not inside one busy worker. task_reject_on_worker_lost only covers a
    # prefork child that dies; a worker killed whole (kill -9) leaves its reserved jobs unacknowledged for the
    # visibility timeout (300 s, not lowered: every longer job would be redelivered). The reconciler resends
    # them as soon as the worker is proven dead instead (bench_agent.jobs.reconcile).
    app.conf.update(
        broker_transport=TRANSPORT if broker_url.startswith(("redis://", "rediss://")) else None,
        task_serializer="json", result_serializer="json", accept_content=["json"],
        worker_prefetch_multiplier=1, task_acks_late=True, task_ignore_result=True,
        task_reject_on_worker_lost=True, broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": visibility_timeout_s, "global_keyprefix": keyprefix,
            # Sweep for tasks a dead worker left unacknowledged every third of the visibility timeout.
            "unacked_restore_interval": max(1, int(visibility_timeout_s / 3)), "unacked_restore_throttle": 1,
            # A worker killed inside a sweep leaves the sweep's mutex behind: let it expire in seconds, not 5 min.
            "unacked_mutex_expire": 10,
        },
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5},
        worker_hijack_root_logger=False, worker_send_task_events=False, result_expires=300,
        worker_consumer=INTAKE,  # a message it cannot take is dropped and logged, never the worker's end
        result_backend_transport_options={"global_keyprefix": keyprefix},
    )
    signing.apply(app, signing.required(insecure))
    app.panio_made, app.panio_host = (broker_url, prefix, visibility_timeout_s, insecure), host
    return app


def per_host_keys() -> bool:
    """Whether each host's Celery keys have a prefix of their own (``PANIO_BROKER_PER_HOST=1``)."""
    return os.environ.get(PER_HOST_ENV) == "1"


def for_host(app, host: str):
    """The app that reaches host ``host``'s queues: ``app`` itself, or with keys per host (``per_host_keys``) one
    made like it for ``host``'s prefix, once per ``app`` and host (its connection pool is that host's)."""
    if not per_host_keys() or getattr(app, "panio_host", None) == host:
        return app
    apps = app.__dict__.setdefault("panio_hosts", {})
    if host not in apps:
        apps[host] = make_app(*app.panio_made, host=host)
        apps[host].conf.task_send_sent_event = app.conf.task_send_sent_event
    return apps[host]
