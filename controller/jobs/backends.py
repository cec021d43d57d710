"""Where job state lives, chosen from the environment.

``PANIO_RESULTS_URL``  results database (default: SQLite at ``state_dir()/results.db``);
``PANIO_BROKER``       a ``redis://`` URL: jobs go to Celery workers (default: run in-process);
``PANIO_REDIS_URL``    leases in Redis (default: ``PANIO_BROKER``; with neither, the lease store this
                       host recorded (``panio worker``, ``panio lease store --set``), else file
                       leases in ``state_dir()/leases``, which is all one machine needs);
``PANIO_REDIS_PREFIX`` key prefix for leases and job queues (default ``panio:``).
"""

from __future__ import annotations

import os

from bench_agent.paths import state_dir


def results_url() -> str:
    from bench_agent.jobs.fences import results_url as url  # one resolution for both sides (fences live there too)

    return url()


def results_store():
    from bench_agent.jobs.results import ResultStore

    return ResultStore(results_url())


def broker_url() -> str | None:
    return os.environ.get("PANIO_BROKER") or None


def redis_url() -> str | None:
    return os.environ.get("PANIO_REDIS_URL") or broker_url()


def redis_prefix() -> str:
    return os.environ.get("PANIO_REDIS_PREFIX", "panio:")


_REDIS_STORES: dict[tuple[str, str], object] = {}


def lease_store():
    """Redis leases when Redis is configured, else the Redis store this host recorded (so a shell without
    PANIO_BROKER on a worker's host still sees the worker's leases), else file leases in the state directory.
    One client per process: a connection per call costs ~1 ms. Fencing tokens are claimed in the results
    database (``bench_agent.jobs.fences``), so they never go backwards when Redis loses its data."""
    from bench_agent.jobs import lease_guard
    from bench_agent.jobs import leases

    url, prefix = redis_url(), redis_prefix()
    if not url:
        mine = lease_guard.recorded()
        if not mine:
            return leases.FileLeaseStore(state_dir() / "leases")
        url, prefix = mine[0]["url"], mine[0].get("prefix", "panio:")
    key = (url, prefix)
    if key not in _REDIS_STORES:
        _REDIS_STORES[key] = leases.RedisLeaseStore(url, prefix)  # fences: the results database, opened on use
    return _REDIS_STORES[key]


def dispatch_caller(lab):
    """How ``panio job run`` (and suites, health checks) run a job's steps in this process: each operation
    through the lab's dispatcher to the target's host (in-process, SSH or the host's worker), presenting the
    job's lease token, which the host checks again before any side effect."""
    from controller.dispatch import Dispatcher

    def caller(target: str, token: int, leases):
        d = Dispatcher(lab, leases=leases, token=token)
        return lambda op, args: d.call(target, op, args)

    return caller
