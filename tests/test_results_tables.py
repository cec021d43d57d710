"""The results database's tables are built once per process (issue 17, friction 8).

`panio schedule serve` grew from 73 to 152 MiB over ~100 suite runs: every
call built fresh SQLAlchemy ``Table`` objects against one long-lived engine,
and the engine's compiled-statement cache kept each set (and its compiled
statements) alive until the cache filled. A long-lived process must hold one
set of tables whatever the number of calls.
"""

from __future__ import annotations

import gc

import sqlalchemy as sa

from bench_agent.jobs.fences import FenceStore
from bench_agent.jobs.results import ResultStore
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
