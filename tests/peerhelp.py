"""Real peers for the job path: a private redis-server, `panio worker` processes, a database to read directly.

Also the machine's own Redis (``SHARED_REDIS``), each test under a key prefix of its own (the ``prefix``
fixture, which conftest.py registers for every test module), and the one-host lab the worker tests drive (``worker_lab``).

Workers sign and verify messages with the test keys (``keyhelp``) and serve the targets of one lab file,
``Workers.lab``, which the test's own commands edit too (``use_lab``): the host's configuration and the
controller's are the same file, as after `panio setup`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import keyhelp
from conftest import PANIO
from jobhelp import wait_for

REDIS = "/usr/bin/redis-server"
SHARED_REDIS = "redis://127.0.0.1:6379/5"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class PrivateRedis:
    """redis-server on a free loopback port: ``aof=False`` keeps nothing across a restart (a common deployment)."""

    def __init__(self, root: Path, aof: bool = False) -> None:
        self.root, self.aof, self.port = root, aof, free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        self.proc = subprocess.Popen([REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      *persistence, "--dir", str(self.root)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: answers(self.port), timeout_s=10, every_s=0.05)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # with AOF, redis flushes it and exits
            self.proc.wait(timeout=10)

    def restart(self, down_s: float = 0.3) -> None:
        import time

        self.stop()
        time.sleep(down_s)
        self.start()


class Workers:
    """`panio worker` processes sharing one broker, prefix and results database (SQLite in ``root``)."""

    def __init__(self, root: Path, broker: str, worker_broker: str | None = None, **env: str) -> None:
        self.root, self.lab = root, root / "lab.toml"
        self.env = {"PANIO_BROKER": broker, "PANIO_REDIS_PREFIX": f"t{uuid.uuid4().hex[:8]}:",
                    "PANIO_RESULTS_URL": f"sqlite:///{root / 'results.db'}", **keyhelp.controller_env(), **env}
        # what only the workers get: their signing keys, and their own broker user when it has one
        self.worker_env = {**keyhelp.worker_env(), **({"PANIO_BROKER": worker_broker} if worker_broker else {})}
        self.procs: list[subprocess.Popen] = []

    def start(self, host: str, *extra: str, concurrency: int = 3) -> subprocess.Popen:
        log = self.root / f"worker-{host}-{len(self.procs)}.log"
        env = {**os.environ, **self.env, **self.worker_env, "PANIO_STATE_DIR": str(self.root / "wstate"),
               "HOME": str(self.root)}
        if not self.lab.exists():
            self.lab.write_text("")  # an empty lab: the worker serves no target until the test adds some
        proc = start_worker(host, self.lab, env, log, concurrency, *extra)
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

    def store(self):
        """The results database itself: read without `panio job status`, which could settle a job on its own."""
        from bench_agent.results.store import ResultStore

        return ResultStore(self.env["PANIO_RESULTS_URL"])

    def logs(self) -> str:
        return "".join(p.log.read_text() for p in self.procs)


def use_lab(panio, workers: Workers) -> None:
    """Point ``panio`` at the workers' lab file, emptied: the test's commands and the workers share it."""
    panio.env.update(workers.env)
    panio.lab = workers.lab
    panio.env["PANIO_LAB"] = str(workers.lab)
    workers.lab.unlink(missing_ok=True)
    panio("init")


def worker_lab(panio, workers: Workers, host: str = "h1", targets: tuple[str, ...] = ("t1",)) -> None:
    """A new lab with ``targets`` on ``host``, which only ``workers`` reach (its SSH address does not resolve)."""
    use_lab(panio, workers)
    panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
    for t in targets:
        panio("target", "add", t, "--host", host)


def drop_keys(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` in the Redis at ``url``."""
    import redis

    r = redis.Redis.from_url(url)
    for key in r.scan_iter(match=f"{prefix}*"):
        r.delete(key)


@pytest.fixture
def prefix():
    """A key prefix of this test's own in ``SHARED_REDIS``, emptied afterwards."""
    p = f"panio-test-{uuid.uuid4().hex[:10]}:"
    yield p
    drop_keys(SHARED_REDIS, p)


def agent_call(env: dict, op: str, args: dict) -> dict:
    """One request to a real `python -m bench_agent.agent` (what the SSH transport talks to), as JSON lines."""
    line = json.dumps({"v": 1, "id": 1, "op": op, "args": args}) + "\n"
    p = subprocess.run([sys.executable, "-P", "-m", "bench_agent.agent"], input=line, capture_output=True,
                       text=True, env=env, timeout=30)
    return json.loads(p.stdout.splitlines()[1])


def start_worker(host: str, lab: Path, env: dict, log: Path, concurrency: int, *extra: str) -> subprocess.Popen:
    """A real `panio worker --host HOST` in a session of its own, its output in ``log``, once it says it is ready."""
    proc = subprocess.Popen([PANIO, "worker", "--host", host, "--lab", str(lab), "--concurrency", str(concurrency),
                             *extra], env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    proc.log = log
    wait_for(lambda: "ready." in log.read_text() or proc.poll() is not None, timeout_s=60)
    assert proc.poll() is None, log.read_text()
    return proc
