"""Several workers' first jobs on a fresh PostgreSQL database (issue 21, item 5).

Each worker creates the results tables (``panio_fences``, ``panio_jobs``, ...) the first time it
touches the database. On PostgreSQL two concurrent ``CREATE TABLE`` of one name fail for one of
them with an ``IntegrityError`` (the row type's unique key in ``pg_type``) or ``DuplicateTable``:
a worker's first job failed and was re-sent ~90 s later as "worker died" although its worker
was alive. Here real processes are released at the same moment on a database of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from jobhelp import PG_URL

import bench_agent

WORKERS = 6
ROUNDS = 3  # a fresh database each: the race is lost only some of the time

# One worker: imports done and one connection open, it waits for EOF on the shared pipe, then does
# what a worker's first job does with the results database (half of them the job tables first).
CHILD = """
import os, sys
fd, url, token = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
from bench_agent.leases.fences import FenceStore
from bench_agent.results.store import ResultStore
from bench_agent.results.db import engine_for
engine_for(url).connect().close()
print("ready", flush=True)
os.read(fd, 1)
if token % 2:
    fences, store = FenceStore(url), ResultStore(url)
else:
    store, fences = ResultStore(url), FenceStore(url)
fences.claim("pico", token)
store.create_job("race", "pico", None, {"steps": []})
"""


def _admin():
    return sa.create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT",
                            connect_args={"connect_timeout": 3})


@pytest.fixture
def fresh_database():
    """A new, empty PostgreSQL database: yields a factory of them, each dropped at the end."""
    admin = _admin()
    names: list[str] = []

    def make() -> str:
        name = "panio_race_" + uuid.uuid4().hex[:12]
        try:
            with admin.connect() as c:
                c.execute(sa.text(f"CREATE DATABASE {name}"))
        except sa.exc.OperationalError as exc:
            pytest.skip(f"PostgreSQL not available at {PG_URL}: {exc.orig}")
        names.append(name)
        return PG_URL.rsplit("/", 1)[0] + "/" + name

    yield make
    with admin.connect() as c:
        for name in names:
            c.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


def _race(url: str) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(bench_agent.__file__).parent.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    go_r, go_w = os.pipe()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(go_r), url, str(token)], pass_fds=(go_r,),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for token in range(1, WORKERS + 1)]
    os.close(go_r)
    try:
        for p in procs:  # every worker is connected and waiting (EOF here: it died before, see its stderr below)
            if p.stdout.readline() != "ready\n":
                break
    finally:
        os.close(go_w)  # EOF for all of them at once
    done = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def test_workers_create_the_tables_of_a_fresh_postgresql_database_at_once(fresh_database):
    for _ in range(ROUNDS):
        url = fresh_database()
        done = _race(url)
        failed = [f"exit {p.returncode}: {p.stderr.strip()[-2000:]}" for p in done if p.returncode != 0]
        assert not failed, "\n\n".join(failed)
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as c:
                tables = c.execute(sa.text("SELECT relname FROM pg_class WHERE relkind = 'r' "
                                           "AND relname LIKE 'panio\\_%' ORDER BY relname")).scalars().all()
                from bench_agent.results.db import fence_table, job_tables

                expected = sorted([*job_tables()[0].tables, *fence_table()[0].tables])  # what a worker's store makes
                assert "panio_jobs" in expected and tables == expected
                assert c.execute(sa.text("SELECT target, high FROM panio_fences")).all() == [("pico", WORKERS)]
                assert c.execute(sa.text("SELECT count(*) FROM panio_jobs")).scalar() == WORKERS
        finally:
            engine.dispose()
