"""A pooled PostgreSQL connection the server dropped (a restart, ``pg_terminate_backend``) leaves no traceback.

SQLAlchemy's pool logs "Exception during reset or similar" with a traceback when a connection goes back to the
pool and its reset (a ROLLBACK) fails. panio's own ``engine_connect`` listener (``results.db._commit_mode``)
switches a connection's commit mode with the driver before SQLAlchemy sees the connection: when the server had
dropped it, the switch failed outside SQLAlchemy's error handling, so nothing invalidated the connection, and it
went back through the reset, which failed in turn. A worker's log showed that traceback each time the results
database went away mid-job. The listener now invalidates the connection it could not switch.

Real PostgreSQL, its own database (``outagehelp.AwayDatabase``), real worker processes.
"""

from __future__ import annotations

import gc
import logging

import pytest

from jobhelp import job_file, wait_for
from outagehelp import AwayDatabase


@pytest.fixture
def away_db():
    db = AwayDatabase()
    yield db
    db.drop()


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_dropped_connection_whose_commit_mode_cannot_be_switched_is_invalidated_not_reset(away_db):
    import sqlalchemy as sa

    from bench_agent.results import db

    url = away_db.url.replace("connect_timeout=3", "connect_timeout=3&application_name=dropped")
    errors = _Errors()
    logging.getLogger("sqlalchemy.pool").addHandler(errors)
    try:
        with db.engine_for(url).connect() as c:  # the pool's one connection, durable commits
            c.execute(sa.text("SELECT 1"))
        away_db.away()  # the server drops it while it waits in the pool
        away_db.back()
        with pytest.raises(Exception, match="(?i)connection|terminat|closed"):
            with db.engine_for(url, relaxed=True).connect() as c:  # its commit mode must be switched: it fails
                c.execute(sa.text("SELECT 1"))
        gc.collect()  # a connection nobody closed goes back to the pool here, through its reset
        with db.engine_for(url, relaxed=True).connect() as c:  # the next caller gets a new connection
            assert c.execute(sa.text("SELECT 1")).scalar() == 1
        assert not [m for m in errors.messages if "reset" in m], errors.messages
    finally:
        logging.getLogger("sqlalchemy.pool").removeHandler(errors)
        db.dispose(url)


LONG = ("lease_ttl_s = 2\n[[steps]]\nname = 'first'\nrun = 'ping ${target} --count 1'\n"
        "[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 40 --interval 0.1'\n"
        "[[steps]]\nname = 'after'\nrun = 'ping ${target} --count 1'\n")


def test_a_workers_log_has_no_traceback_after_the_results_database_went_away_mid_job(panio, tmp_path, away_db):
    from peerhelp import SHARED_REDIS, Workers, drop_keys, worker_lab

    workers = Workers(tmp_path, SHARED_REDIS, PANIO_RESULTS_URL=away_db.url)
    try:
        worker_lab(panio, workers)
        workers.start("h1")
        job_id = panio("job", "submit", job_file(tmp_path, LONG, "long.toml"), "--target", "t1",
                       "--json").json()["job_id"]
        store = workers.store()
        wait_for(lambda: [s for s in store.job(job_id)["steps"] if s["name"] == "long" and s["status"] == "running"],
                 timeout_s=60)
        away_db.away()  # every connection of the worker's pool dropped, mid-job
        wait_for(lambda: "results database unreachable since" in workers.logs(), timeout_s=60)
        away_db.back()
        wait_for(lambda: "results database back after" in workers.logs(), timeout_s=60)
        done = wait_for(lambda: (j := _job(store, job_id)) and j["state"] == "done" and j, timeout_s=60)
        assert done["health"] == "complete", done["reason"]
    finally:
        workers.stop_all()
        drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])
    log = workers.logs()
    assert "Exception during reset" not in log and "Traceback" not in log, log


def _job(store, job_id: int) -> dict | None:
    try:
        return store.job(job_id)
    except Exception:  # noqa: BLE001 - the test's own reads while the database comes back
        return None
