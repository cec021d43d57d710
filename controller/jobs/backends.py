"""Where job state lives, chosen from the environment.

``PANIO_RESULTS_URL``  results database (default: SQLite at ``state_dir()/results.db``);
``PANIO_BROKER``       a ``redis://`` URL: jobs go to Celery workers (default: run in-process);
``PANIO_REDIS_URL``    leases in Redis (default: ``PANIO_BROKER``; with neither, file leases in
                       ``state_dir()/leases``, which is all one machine needs);
``PANIO_REDIS_PREFIX`` key prefix for leases and job queues (default ``panio:``).
"""

from __future__ import annotations

import os

from bench_agent.paths import state_dir


def results_url() -> str:
    url = os.environ.get("PANIO_RESULTS_URL")
    if url:
        return url
    state_dir().mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{state_dir() / 'results.db'}"


def results_store():
    from bench_agent.results import ResultStore

    return ResultStore(results_url())


def broker_url() -> str | None:
    return os.environ.get("PANIO_BROKER") or None


def redis_url() -> str | None:
    return os.environ.get("PANIO_REDIS_URL") or broker_url()


def redis_prefix() -> str:
    return os.environ.get("PANIO_REDIS_PREFIX", "panio:")


_REDIS_STORES: dict[tuple[str, str], object] = {}


def lease_store():
    """Redis leases when Redis is configured (one client per process: a connection per call costs ~1 ms),
    else file leases in the state directory."""
    from bench_agent import leases

    url = redis_url()
    if url:
        key = (url, redis_prefix())
        if key not in _REDIS_STORES:
            _REDIS_STORES[key] = leases.RedisLeaseStore(url, redis_prefix())
        return _REDIS_STORES[key]
    return leases.FileLeaseStore(state_dir() / "leases")


def panio_argv() -> list[str]:
    """How a step runs panio: this very interpreter (never a shim on PATH), isolated from the step's cwd."""
    from bench_agent.process import panio_argv as argv

    return argv()
