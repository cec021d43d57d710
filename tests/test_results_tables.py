"""The results database's tables are built once per process (issue 17, friction 8).

`panio schedule serve` grew from 73 to 152 MiB over ~100 suite runs: every
call built fresh SQLAlchemy ``Table`` objects against one long-lived engine,
and the engine's compiled-statement cache kept each set (and its compiled
statements) alive until the cache filled. A long-lived process must hold one
set of tables whatever the number of calls.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time

import sqlalchemy as sa

from bench_agent.leases.fences import FenceStore
from bench_agent.results.store import ResultStore
from controller.jobs.schedules import ScheduleStore


def _tables() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, sa.Table))


def _metadata() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, sa.MetaData))


def test_many_calls_build_no_new_tables(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    ResultStore(url), FenceStore(url), ScheduleStore(url)  # first use builds them
    tables, metadata = _tables(), _metadata()
    for i in range(60):  # what a scheduler and a job follower do, one store per call (backends.results_store())
        store = ResultStore(url)
        job = store.create_job(f"job{i}", "pico", None, {"steps": []})
        store.record_step(job, 0, {"name": "s", "command": "panio ping", "status": "pass"})
        store.add_artifact(job, "serial-console.log", "x")
        store.finish(job, "complete", "passed")
        store.job(job), store.list_jobs(), store.active_jobs()
        FenceStore(url).claim(f"t{i % 3}", i + 1)
        ScheduleStore(url).list()
    assert _tables() == tables
    assert _metadata() == metadata
    engine = ResultStore(url).engine
    assert len(engine._compiled_cache) < 60  # one entry per statement shape, not per call


# Each child opens the database at the same instant (a start time a few seconds ahead, after its imports),
# as a night's scheduler, dashboard and workers do on a fresh results database, and sets it up as panio's
# engine does on every new connection (``results_db._sqlite_pragmas``). SQLAlchemy's own Python before that
# hook spreads the children too far apart to meet the race reliably; the raw connection does not.
OPENER = """
import sqlite3, sys, time
from bench_agent.results.db import _sqlite_pragmas
start = float(sys.argv[2])
while start - time.time() > 0.002:  # asleep until 2 ms before it, then spinning: 8 children, little CPU
    time.sleep(start - time.time() - 0.002)
while time.time() < start:
    pass
try:
    conn = sqlite3.connect(sys.argv[1], timeout=30)
    _sqlite_pragmas(conn, None)
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
    print("ok")
except Exception as exc:
    print("failed:", type(exc).__name__, exc)
"""


def test_processes_opening_a_fresh_database_together_all_open_it(tmp_path):
    """SQLite fails all but one of the processes that turn a fresh database to WAL at the same moment with
    "database is locked", at once (no busy wait): a worker of a night's lab did not start. 8 at once, 8
    times: without the retry about 1 open in 8 failed here."""
    for round_ in range(8):
        path = tmp_path / f"fresh{round_}.db"
        start = time.time() + 1  # past the children's imports on a quiet machine; a late one only opens later
        children = [subprocess.Popen([sys.executable, "-c", OPENER, str(path), str(start)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True) for _ in range(8)]
        outs = [c.communicate(timeout=120)[0].strip() for c in children]
        assert outs == ["ok"] * 8, outs
