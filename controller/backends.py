"""Where job state lives, chosen from the environment.

``PANIO_RESULTS_URL``  results database (default: SQLite at ``state_dir()/results.db``);
``PANIO_BROKER``       a ``redis://`` URL: jobs go to Celery workers (default: run in-process);
``PANIO_REDIS_URL``    leases in Redis (default: ``PANIO_BROKER``; with neither, the lease store this
                       host recorded (``panio worker``, ``panio lease store --set``), else file
                       leases in ``lab_state_dir()/leases``, which is all one machine needs);
                       either way each lab's leases are its own (``lease_store``);
``PANIO_REDIS_PREFIX`` key prefix for leases and job queues (default ``panio:``);
``PANIO_VISIBILITY_TIMEOUT_S`` how long the broker keeps a taken job before giving it to another worker.

Below the transports and the dispatcher, which read it too (the lease store,
the broker's Celery app); it reaches nothing of ``controller`` above it.
"""

from __future__ import annotations

import os

from bench_agent.errors import NotConfigured


def results_url() -> str:
    from bench_agent.leases.fences import results_url as url  # one resolution for both sides (fences live there too)

    return url()


def results_store():
    from bench_agent.results.store import ResultStore

    return ResultStore(results_url())


def broker_url() -> str | None:
    return os.environ.get("PANIO_BROKER") or None


def redis_url() -> str | None:
    return os.environ.get("PANIO_REDIS_URL") or broker_url()


def redis_prefix() -> str:
    return os.environ.get("PANIO_REDIS_PREFIX", "panio:")


_REDIS_STORES: dict[tuple[str, str], object] = {}


NO_LAB = ""  # ``lease_store(NO_LAB)``: the leases of no lab (the scheduler's own, which all labs share)


def lease_store(lab_key: str | None = None):
    """Redis leases when Redis is configured, else the Redis store this host recorded (so a shell without
    PANIO_BROKER on a worker's host still sees the worker's leases), else file leases in the state directory.
    One client per process: a connection per call costs ~1 ms. Fencing tokens are claimed in the results
    database (``bench_agent.leases.fences``), so they never go backwards when Redis loses its data.

    Leases are a lab's (``lab_key``, else this process's lab: ``bench_agent.paths.current_lab``; ``NO_LAB``:
    no lab's), so two labs that both name a target ``h`` never block each other
    (``bench_agent.leases.base.lab_prefix``)."""
    from bench_agent.leases import guard as lease_guard
    from bench_agent.leases.file_store import FileLeaseStore
    from bench_agent.leases.redis_store import RedisLeaseStore

    from bench_agent.paths import current_lab, lab_state_dir, legacy_state_dir

    lab_key = current_lab() if lab_key is None else lab_key
    url, prefix = redis_url(), redis_prefix()
    if not url:
        mine = lease_guard.recorded()
        if not mine:
            return FileLeaseStore((lab_state_dir(lab_key) if lab_key else legacy_state_dir()) / "leases")
        url, prefix = mine[0]["url"], mine[0].get("prefix", "panio:")
    key = (url, prefix)
    if key not in _REDIS_STORES:
        _REDIS_STORES[key] = RedisLeaseStore(url, prefix)  # fences: the results database, opened on use
    return _REDIS_STORES[key].for_lab(lab_key)


def visibility_timeout_s() -> float:
    from bench_agent.jobs.worker import DEFAULT_VISIBILITY_S

    return float(os.environ.get("PANIO_VISIBILITY_TIMEOUT_S", DEFAULT_VISIBILITY_S))


def celery_app(insecure: bool | None = None):
    """The broker's Celery app, as the controller, the workers and ``CeleryTransport`` all build it, signing
    with this machine's keys (``bench_agent.jobs.signing``); ``insecure`` (default: ``PANIO_INSECURE_UNSIGNED``)
    lets it run unsigned when there are none."""
    from bench_agent.jobs import signing
    from bench_agent.jobs.worker import make_app

    url = broker_url()
    if not url:
        raise NotConfigured("no broker: set PANIO_BROKER=redis://HOST:6379/N to queue jobs to workers",
                            hint="or run the job here with `panio job run FILE`")
    insecure = signing.insecure_from_env() if insecure is None else insecure
    made = (url, redis_prefix(), visibility_timeout_s(), insecure)
    # One app a process while its keys stay the same files: making one loads the signing key and every trusted
    # certificate (37 ms of CPU with 100 hosts' certificates, more with more), which a controller serving the API
    # paid for each job it queued (docs/scale.md, "The controller under load"). A key or store changed on disk
    # (a rotation) makes a new one, and so does one whose mode or owner changed: making the app loads the keys and
    # checks who could have written them (``signing.required``), so the files are checked whenever they are read,
    # not at each job (0.9 ms of CPU with 100 certificates, a fifth of the API's CPU a submission).
    from bench_agent.jobs import PER_HOST_ENV

    stamp = (made, os.environ.get(PER_HOST_ENV), _keys_stamp(signing.configured(check=False)))
    found = _APPS.get(made)
    if found is None or found[0] != stamp:
        found = _APPS[made] = (stamp, make_app(*made))
    return found[1]


_APPS: dict[tuple, tuple] = {}


def _keys_stamp(keys) -> tuple | None:
    """What says the signing keys are the same files as before: their paths and times of change (of their content,
    and of their mode or owner: ``st_ctime``; a certificate added to or removed from the store changes its
    folder's)."""
    if keys is None:
        return None
    try:
        return tuple((str(p), (st := p.stat()).st_mtime_ns, st.st_ctime_ns) for p in (keys.key, keys.cert, keys.store))
    except OSError:
        return None
