"""Redis restarted during a suite: no job lost, none run twice (a private redis-server, AOF on)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import uuid

import pytest

from conftest import PANIO
from jobhelp import job_file, stop, wait_for

REDIS = "/usr/bin/redis-server"
STEPS = "".join(f"[[steps]]\nname = 's{i}'\nrun = 'ping ${{target}} --count 4 --interval 0.1'\n" for i in range(3))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    def __init__(self, root) -> None:
        self.root, self.port = root, free_port()
        self.proc = None

    def start(self) -> None:
        self.proc = subprocess.Popen([REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.root)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: _answers(self.port), timeout_s=10, every_s=0.05)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # redis flushes its AOF and exits
            self.proc.wait(timeout=10)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed")
def test_redis_restarted_during_a_suite(panio, tmp_path):
    redis = PrivateRedis(tmp_path)
    redis.start()
    env = {"PANIO_BROKER": f"redis://127.0.0.1:{redis.port}/0", "PANIO_REDIS_PREFIX": f"t{uuid.uuid4().hex[:8]}:",
           "PANIO_RESULTS_URL": f"sqlite:///{tmp_path / 'results.db'}", "PANIO_VISIBILITY_TIMEOUT_S": "3"}
    panio.env.update(env)
    panio("init")
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    for t in ("b1a", "b1b"):
        panio("target", "add", t, "--host", "bench1")
    job_file(tmp_path, "name = 'one'\n" + STEPS, "one.toml")
    job_file(tmp_path, "name = 'two'\n" + STEPS, "two.toml")
    suite = job_file(tmp_path, "jobs = ['one.toml', 'two.toml']\ntargets = ['b1a', 'b1b']\n", "suite.toml")
    log = tmp_path / "worker.log"
    worker = subprocess.Popen([PANIO, "worker", "--host", "bench1", "--concurrency", "4"],
                              env={**panio.env, "PANIO_STATE_DIR": str(tmp_path / "w")},
                              stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    run = None
    try:
        wait_for(lambda: "ready." in log.read_text(), timeout_s=60)
        run = subprocess.Popen([PANIO, "suite", "run", suite, "--json"], env=panio.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "job step start" in log.read_text(), timeout_s=30, every_s=0.05)
        redis.stop()
        time.sleep(0.5)
        redis.start()
        out, err = run.communicate(timeout=120)
    finally:
        if run is not None:
            stop(run)
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        redis.stop()
    jobs = panio("job", "list", "--json").json()
    assert len(jobs) == 4 and all(j["state"] == "done" for j in jobs), jobs  # none lost
    text = log.read_text()
    for j in jobs:  # none run twice: each job was leased once and each of its steps started at most once
        assert len(re.findall(rf"\[panio-job-{j['id']}\]: job {j['id']}: leased", text)) == 1, text
        for i in (1, 2, 3):
            assert len(re.findall(rf"\[panio-job-{j['id']}\]: job step start: {i}/3 ", text)) <= 1
        assert j["health"] == "complete" or "lease" in j["reason"] or "unreachable" in j["reason"].lower(), j
    assert all(j["result"] == "passed" for j in jobs), jobs  # Redis calls ride out a short restart
