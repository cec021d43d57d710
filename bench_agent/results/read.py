"""The job history's reads as SQL text, and a reader that sends them with the database's driver alone.

``ResultStore`` (SQLAlchemy) sends these statements for ``job`` and ``list_jobs``; ``Reader`` sends the same
text through ``sqlite3`` or ``psycopg`` directly, for the commands an operator runs in a new process each
time (``panio job list``, ``panio job status``): importing SQLAlchemy costs a new process about 0.3 s of
CPU, the queries milliseconds (docs/scale.md). The reader checks no schema and creates nothing: any statement
the database cannot answer as written (no file yet, a table or column an older panio did not make) raises
``Unanswered``, and the caller goes the store's way, which creates and migrates. One text, two senders: the
EXPLAIN tests of the store (tests/test_history_scale.py) cover what the reader sends.

Statements name their parameters ``:name`` (SQLAlchemy's ``text`` and ``sqlite3`` take that; ``psycopg``
gets ``%(name)s``).
"""

from __future__ import annotations

import json
import os
import re

from bench_agent.errors import NotConfigured

# panio_jobs' and panio_steps' columns in their tables' order (``results_db.job_tables`` checks its own against these)
JOB_COLUMNS = ("id", "name", "target", "host", "state", "health", "result", "reason", "error", "spec", "worker",
               "fence", "cancel_requested", "created_at", "started_at", "leased_at", "finished_at", "beat_at",
               "sent_at")
STEP_COLUMNS = ("job_id", "idx", "name", "command", "status", "exit_status", "duration_s", "checks", "captured",
                "output", "started_at")
JOB_FILTERS = ("target", "state", "name", "host", "health", "result")  # the columns a job list filters on (indexed)
ACTIVE = ("queued", "running")  # the states of a job not done yet
NOT_DONE = "state != 'done'"  # their partial index's condition: a query repeats it word for word to use it

JOB = f"SELECT {', '.join(JOB_COLUMNS)} FROM panio_jobs WHERE id = :id"
STEPS = f"SELECT {', '.join(STEP_COLUMNS)} FROM panio_steps WHERE job_id = :id ORDER BY idx"


def page(limit: int = 20, before: int | None = None, **filters: str | None) -> tuple[str, dict]:
    """A page of jobs newest first (``before``: ids below it; ``filters``: columns of ``JOB_FILTERS`` equal to a
    value; a state of ``ACTIVE`` also through the partial index of the jobs not done): the statement and its
    parameters. Each filter walks its ``(column, id)`` index backwards and stops at the page's end."""
    where, params = [], {"limit": int(limit)}
    if filters.get("state") in ACTIVE:
        where.append(NOT_DONE)  # a few rows, not the history
    for column in JOB_FILTERS:
        if filters.get(column):
            where.append(f"{column} = :{column}")
            params[column] = filters[column]
    unknown = set(filters) - set(JOB_FILTERS)
    if unknown:
        raise ValueError(f"not a job filter: {', '.join(sorted(unknown))}")
    if before is not None:
        where.append("id < :before")
        params["before"] = int(before)
    sql = f"SELECT {', '.join(JOB_COLUMNS)} FROM panio_jobs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql + " ORDER BY id DESC LIMIT :limit", params


def job_dict(row) -> dict:
    out = dict(row)
    if "spec" in out:  # a row without it: the dashboard's last job of each board
        out["spec"] = json.loads(out["spec"])
    out["error"] = json.loads(out["error"]) if out.get("error") else None
    out["cancel_requested"] = bool(out["cancel_requested"])
    return out


def step_dict(row) -> dict:
    out = dict(row)
    out["checks"] = json.loads(out["checks"] or "[]")
    out["captured"] = json.loads(out["captured"] or "{}")
    return out


def no_such_job(url: str, job_id: int) -> NotConfigured:
    return NotConfigured(f"no job {job_id} in the results database ({url})", hint="see `panio job list`", job=job_id)


class Unanswered(Exception):
    """The reader cannot answer this as written: go the store's way (``ResultStore``), which can."""


class Reader:
    """Reads of the history with the database's driver alone (``sqlite3``; libpq for PostgreSQL,
    ``bench_agent.results.libpq``): no SQLAlchemy, no schema check, one connection.

    ``Reader.open(url)`` is None for a URL it does not take as it stands (another driver, an SQLite URL with
    options or in memory, an SQLite file not made yet, no libpq here, a PostgreSQL it cannot reach: the store
    says why). Use it as a context manager."""

    def __init__(self, url: str, conn, pg: bool) -> None:
        self.url, self.conn, self.pg = url, conn, pg

    @classmethod
    def open(cls, url: str) -> Reader | None:
        if url.startswith("postgresql://"):
            from bench_agent.results.libpq import LibpqConnection

            conn = LibpqConnection.connect(url)
            return None if conn is None else cls(url, conn, pg=True)
        path = url[len("sqlite:///"):]
        if url.startswith("sqlite:///") and "?" not in url and os.path.isfile(path):
            import sqlite3

            try:
                return cls(url, sqlite3.connect(path, timeout=30), pg=False)
            except sqlite3.Error:
                return None  # the store says why
        return None

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.conn.close()

    def rows(self, sql: str, params: dict) -> list[dict]:
        """``sql`` (parameters ``:name``) as the store sends it; rows by column name. ``Unanswered`` when the
        database cannot answer it as written."""
        if self.pg:
            return self._libpq_rows(sql, params)
        import sqlite3

        try:
            cur = self.conn.execute(sql, params)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]
        except sqlite3.Error as exc:
            raise Unanswered(str(exc)) from None

    def _libpq_rows(self, sql: str, params: dict) -> list[dict]:
        from bench_agent.results.libpq import Unconvertible

        order: list[str] = []

        def number(m) -> str:  # :name -> $n, in order of first use
            if m.group(1) not in order:
                order.append(m.group(1))
            return f"${order.index(m.group(1)) + 1}"

        sql = re.sub(r"(?<![:\w]):(\w+)", number, sql)
        try:
            return self.conn.rows(sql, [params[name] for name in order])
        except Unconvertible as exc:
            raise Unanswered(str(exc)) from None

    def job(self, job_id: int) -> dict:
        """The job and its steps, as ``ResultStore.job``."""
        found = self.rows(JOB, {"id": job_id})
        if not found:
            raise no_such_job(self.url, job_id)
        return {**job_dict(found[0]), "steps": [step_dict(s) for s in self.rows(STEPS, {"id": job_id})]}

    def list_jobs(self, limit: int = 20, before: int | None = None, **filters: str | None) -> list[dict]:
        """A page of jobs without their steps, as ``ResultStore.list_jobs``."""
        return [job_dict(r) for r in self.rows(*page(limit, before, **filters))]
