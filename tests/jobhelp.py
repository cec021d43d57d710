"""Helpers for job tests: a fixture lab, job files, PostgreSQL schemas, waiting (for a condition, for processes
to be gone), stopping, a webhook receiver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

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


def dying_job(marker: str) -> str:
    """A job whose first step prints ``marker`` on the board's console and whose second runs long enough (a
    2,000-round ping) for a test to kill its runner mid-job, with a 2 s lease TTL so the lease lapses quickly."""
    return f"""name = "dies"
lease_ttl_s = 2
[[steps]]
name = "say"
run = "panio serial transact ${{target}} 'echo {marker}' --until 'root@sim:~# ' --timeout-ms 10000"
expect_output = "{marker}"
[[steps]]
name = "long ping"
run = "panio ping ${{target}} --count 2000 --interval 0.05"
"""


def pg_schema() -> str:
    """A fresh PostgreSQL schema; returns the results URL that uses it (the test is skipped without PostgreSQL)."""
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
    """``predicate()``'s first true value, asked every ``every_s`` for up to ``timeout_s``.

    On a loaded machine seconds pass between two looks (a CLI call alone can take ten): wait for a state that
    lasts until the test ends it (a job that runs until it is stopped, not one "running" for 4 s), and give
    deadlines that are generous, as a passing wait costs nothing more."""
    deadline, value = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s} s (last: {str(value)[:300]})")


def wait_gone(*pids: int, timeout_s: float = 30, what: str = "") -> None:
    """Wait until none of ``pids`` is alive (``bench_agent.process.pid_alive``: a zombie counts as gone)."""
    from bench_agent.process import pid_alive

    deadline = time.monotonic() + timeout_s
    while alive := [pid for pid in pids if pid_alive(pid)]:
        assert time.monotonic() < deadline, f"{what or 'still running'}: pid {alive} after {timeout_s} s"
        time.sleep(0.02)


def wait_held(panio, job_id: int, timeout_s: float = 60) -> dict:
    """Until job ``job_id`` is held back: still queued, its runner took it (``worker``, ``beat_at``) and kept
    beating for it for more than a second after (the health gate reads the target's health every second and
    the lease wait polls meanwhile). Its status then."""
    def status() -> dict:
        job = panio("job", "status", str(job_id), "--json").json()
        assert job["state"] == "queued", f"job {job_id} was not held back: {job}"
        return job

    taken = wait_for(lambda: (job := status())["worker"] and job["beat_at"] and job, timeout_s)
    return wait_for(lambda: (job := status())["beat_at"] > taken["beat_at"] + 1.5 and job, timeout_s)


def wait_polling(proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Until ``proc`` sleeps in ``time.sleep`` (the kernel reports it in ``hrtimer_nanosleep``), which a panio
    command does only in a poll loop: past its start-up and its first look, waiting for what the test does
    next. Not a fixed sleep that a loaded machine outruns."""
    def polling() -> bool:
        assert proc.poll() is None, f"{proc.args} exited {proc.returncode} before it was seen waiting"
        return Path(f"/proc/{proc.pid}/wchan").read_text() in ("hrtimer_nanosleep", "do_nanosleep")

    wait_for(polling, timeout_s=timeout_s, every_s=0.005)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def stop_group(proc: subprocess.Popen, grace_s: float = 20) -> None:
    """SIGTERM to ``proc``'s process group (started with ``start_new_session``), SIGKILL after ``grace_s``."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # the whole group is gone already
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


class Receiver:
    """An HTTP server on loopback recording each POST (path, JSON body); the first POST to /flaky gets a 500."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict]] = []
        self.failed_once = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/flaky" and not outer.failed_once:
                    outer.failed_once = True
                    self.send_response(500)
                else:
                    outer.posts.append((self.path, body))
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self, path: str) -> list[dict]:
        return [b for p, b in self.posts if p == path]


@pytest.fixture
def receiver():
    """A ``Receiver`` for one test (every test module has it: conftest.py registers this module)."""
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()
