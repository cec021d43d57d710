"""Helpers for job tests: a fixture lab, job files, PostgreSQL schemas, waiting."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def fixture_lab(panio) -> None:
    """pico and qemu on this machine (tag pi5 on pico), far on a remote host."""
    panio("init")
    panio("target", "add", "pico", "--tag", "pi5")
    panio("target", "add", "qemu", "--tag", "sim")
    panio("host", "add", "bench9", "--ssh", "nobody@127.0.0.1", "--port", "9")
    panio("target", "add", "far", "--host", "bench9")


def job_file(tmp: Path, body: str, name: str = "job.toml") -> str:
    path = tmp / name
    path.write_text(body)
    return str(path)


def pg_schema() -> str:
    """A fresh PostgreSQL schema; returns the results URL that uses it (the test is skipped without PostgreSQL)."""
    import pytest
    import sqlalchemy as sa

    schema = "t_" + uuid.uuid4().hex[:12]
    engine = sa.create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://"),
                              connect_args={"connect_timeout": 3})
    try:
        with engine.begin() as c:
            c.execute(sa.text(f"CREATE SCHEMA {schema}"))
    except sa.exc.OperationalError as exc:
        pytest.skip(f"PostgreSQL not available at {PG_URL}: {exc.orig}")
    finally:
        engine.dispose()
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


def drop_pg_schema(url: str) -> None:
    import sqlalchemy as sa

    schema = url.rsplit("%3D", 1)[1]
    engine = sa.create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as c:
        c.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


def wait_for(predicate, timeout_s: float = 20, every_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
