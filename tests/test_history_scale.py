"""The history's queries use their indexes (SQLite and PostgreSQL), and retention deletes in batches.

A modest history (benchmarks/seed_history.py, a few thousand jobs: enough for the planners to prefer an
index where one serves) stands in for the million of docs/scale.md. Each query is the store's own: the
statements ``ResultStore`` sends are caught on the engine and explained as sent. A plan that reads a whole
table (SQLite ``SCAN t`` without an index, PostgreSQL ``Seq Scan`` even with sequential scans priced out)
or sorts the jobs to find a page is what made a page slow on a long history.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

import pytest

from jobhelp import drop_pg_schema, pg_schema

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import seed_history  # noqa: E402

JOBS = 4000
TARGETS = 50


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def seeded(request, tmp_path_factory):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('history') / 'results.db'}"
    else:
        url = pg_schema()
    seed_history.main(["--jobs", str(JOBS), "--results", url, "--targets", str(TARGETS), "--hosts", "5",
                       "--days", "60", "--json"])
    from bench_agent.results.store import ResultStore

    store = ResultStore(url)
    yield store
    if request.param == "postgresql":
        store.engine.dispose()
        drop_pg_schema(url)


def caught(store, read) -> list[tuple[str, object]]:
    """The statements (and their parameters) that ``read(store)`` sends."""
    import sqlalchemy as sa

    sent: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        read(store)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    return [(s, p) for s, p in sent if "panio_" in s and s.lstrip().upper().startswith(("SELECT", "WITH"))]


def plan(store, statement: str, parameters) -> str:
    """The plan of one statement as the engine would run it, as text."""
    with store.engine.connect() as c:
        raw = c.connection.dbapi_connection
        cur = raw.cursor()
        if store.engine.dialect.name == "sqlite":
            cur.execute("EXPLAIN QUERY PLAN " + statement, parameters)
            return "\n".join(row[-1] for row in cur.fetchall())
        cur.execute("SET enable_seqscan = off")  # an index that can serve is then always taken: none is a scan
        cur.execute("EXPLAIN " + statement, parameters)
        out = "\n".join(row[0] for row in cur.fetchall())
        cur.execute("RESET enable_seqscan")
        raw.rollback()
        return out


def full_scans(store, text: str, statement: str) -> list[str]:
    """The lines of a plan that read a whole table, or sort rows to find a page.

    SQLite says ``SCAN t`` also for a walk of the table's own rowid order that a LIMIT ends (the newest page
    without a filter): that one is allowed where the statement filters nothing. Sorting a few rows found by
    an index (the queue) is fine; sorting to find a page means reading every match first."""
    flat = statement.upper().replace("\n", " ")
    filtered, page = " WHERE " in flat, " LIMIT " in flat
    if store.engine.dialect.name == "sqlite":
        return [line for line in text.splitlines() if ("TEMP B-TREE" in line and page)
                or (re.match(r"SCAN panio_\w+$", line) and filtered)]
    return [line for line in text.splitlines()
            if "Seq Scan" in line or (re.match(r"\s*(->  )?(Incremental )?Sort  \(", line) and page)]


def newest_job(store) -> int:
    return store.list_jobs(limit=1)[0]["id"]


READS = {  # what an operator's command or page asks of the history: (read, the index it must use)
    "job list, default page": (lambda s: s.list_jobs(limit=20), None),
    "job list, one target": (lambda s: s.list_jobs(limit=20, target="board-0007"), "ix_panio_jobs_target_id"),
    "job list, running": (lambda s: s.list_jobs(limit=20, state="running"), "ix_panio_jobs_active"),
    "dashboard jobs, incomplete": (lambda s: s.list_jobs(limit=50, health="incomplete"), "ix_panio_jobs_health_id"),
    # a suite or a host has a fifth of the jobs here: walking the newest jobs finds a page as fast
    "dashboard jobs, a suite": (lambda s: s.list_jobs(limit=50, name="serial-soak"), None),
    "dashboard jobs, a host": (lambda s: s.list_jobs(limit=50, host="host-003"), None),
    "dashboard jobs, failed": (lambda s: s.list_jobs(limit=50, result="failed"), "ix_panio_jobs_result_id"),
    "next page": (lambda s: s.list_jobs(limit=50, before=newest_job(s) - 500), None),
    "queue": (lambda s: s.active_jobs(), "ix_panio_jobs_active"),
    "last job of each target": (lambda s: s.last_jobs([f"board-{t:04d}" for t in range(TARGETS)]),
                                "ix_panio_jobs_target_id"),
    "job status": (lambda s: s.job(newest_job(s) - 7), None),
    "artifacts": (lambda s: s.list_artifacts(newest_job(s) - 7), None),
}


@pytest.mark.parametrize("what", list(READS))
def test_history_reads_use_their_index_and_scan_no_table(seeded, what):
    read, index = READS[what]
    statements = caught(seeded, read)
    assert statements, f"{what}: no statement caught"
    plans = [plan(seeded, s, p) for s, p in statements]
    for (statement, _), text in zip(statements, plans):
        assert not full_scans(seeded, text, statement), f"{what}: a full scan\n{statement}\n{text}"
    if index:
        assert any(index in text for text in plans), f"{what}: {index} not used\n" + "\n".join(plans)


def test_retention_finds_old_jobs_by_their_index_and_deletes_them_in_batches(seeded):
    """Each batch is one transaction; the query that finds a batch uses the finish-time index; a job
    written while retention runs goes in between two batches instead of waiting for the whole prune."""
    import sqlalchemy as sa

    store = seeded
    before = time.time() - 30 * 86400  # half of the 60 days seeded: about JOBS / 2 jobs
    expected = store.prune(before, dry_run=True)
    assert JOBS * 0.4 < expected["jobs"] < JOBS * 0.6 and expected["steps"] == 5 * expected["jobs"]

    written: list[tuple[int, float]] = []
    finding: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if "panio_jobs" in statement and "LIMIT" in statement.upper():
            finding.append((statement, parameters))

    def writer():
        while not done.is_set():
            written.append((store.create_job("during-prune", "board-0001", None, {"steps": []}), time.monotonic()))

    done = threading.Event()
    thread = threading.Thread(target=writer)
    sa.event.listen(store.engine, "before_cursor_execute", record)
    thread.start()
    try:
        t0 = time.monotonic()
        counts = store.prune(before, batch=200)
        t1 = time.monotonic()
    finally:
        done.set()
        thread.join(timeout=30)
        sa.event.remove(store.engine, "before_cursor_execute", record)
    assert {k: counts[k] for k in ("jobs", "steps", "artifacts")} == \
        {k: expected[k] for k in ("jobs", "steps", "artifacts")}
    assert store.prune(before, dry_run=True)["jobs"] == 0
    batches = -(-expected["jobs"] // 200)
    assert len(finding) >= batches  # one query finds each batch, each in its own transaction
    text = plan(store, *finding[0])
    assert not full_scans(store, text, finding[0][0]) and "ix_panio_jobs_ended_id" in text, text
    during = [at for _, at in written if t0 < at < t1]
    assert during, "no job was written while retention ran: it held the database for the whole prune"
    assert all(store.state(job_id) == "queued" for job_id, _ in written)  # the writes kept are untouched
