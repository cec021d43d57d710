"""What the history tools share (seed_history.py, history_scale.py, scale.py): the results database they are
pointed at (``--results URL``, checked the same way), the span a history is seeded over (``--days``), and
asking that database its size and its newest job. (The leading underscore keeps `make bench` from running
this module as a benchmark.)
"""

from __future__ import annotations

import argparse
import os

DAYS = 90  # the span seed_history.py spreads a history over, ending an hour ago; history_scale.py prunes by it


def results_url(text: str) -> str:
    """An argparse type: a results URL these tools can seed, measure and size."""
    if not text.startswith(("sqlite:///", "postgresql://")):
        raise argparse.ArgumentTypeError(f"{text!r}: sqlite:///PATH or postgresql://USER@HOST/DB")
    return text


def add_results(p: argparse.ArgumentParser, help: str, required: bool = True) -> None:
    p.add_argument("--results", required=required, type=results_url, metavar="URL", help=help)


def add_days(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--days", type=float, default=DAYS, help=f"{help} (default {DAYS})")


def create_database(url: str) -> None:
    """Create the PostgreSQL database of ``url`` if it does not exist (connected to ``postgres``)."""
    import psycopg

    base, _, rest = url.rpartition("/")
    name = rest.split("?", 1)[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def empty_like(url: str, folder) -> str:
    """A new empty database of ``url``'s engine: a file in ``folder``, or a PostgreSQL database of its own on
    the same server (``drop_empty`` removes it)."""
    if url.startswith("sqlite:///"):
        return f"sqlite:///{folder / 'empty.db'}"
    base, _, rest = url.rpartition("/")
    name, _, query = rest.partition("?")
    empty = f"{base}/{name}_empty_{os.getpid()}" + (f"?{query}" if query else "")
    create_database(empty)
    return empty


def drop_empty(url: str) -> None:
    """Drop what ``empty_like`` made on PostgreSQL (a file goes with its folder)."""
    if url.startswith("postgresql://"):
        from bench_agent.results import db as results_db

        import psycopg

        results_db.dispose(url)
        base, _, rest = url.rpartition("/")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{rest.split("?", 1)[0]}" WITH (FORCE)')


def db_size(url: str) -> int:
    """The database's size on disk in bytes (SQLite: the file and its write-ahead log)."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return int(_scalar(url, "SELECT pg_database_size(current_database())"))


def newest_job(url: str) -> int:
    """The largest job id there (0 for none)."""
    return int(_scalar(url, "SELECT coalesce(max(id), 0) FROM panio_jobs"))


def _scalar(url: str, sql: str):
    from bench_agent.results.store import ResultStore

    import sqlalchemy as sa

    with ResultStore(url).engine.connect() as c:  # panio's own engine (and tables) for the URL
        return c.execute(sa.text(sql)).scalar()
