"""A `panio worker` that stops stops the serial captures its jobs started, and only those: a capture an operator
started by hand (`panio serial watch`) keeps running though it shares the worker's state directory. Real worker,
real simulated board, real capture supervisors."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from conftest import PANIO
from jobhelp import job_file, wait_for
from peerhelp import Workers, drop_keys
from simbench import sim_bench

from bench_agent.daemons import registry
from bench_agent.procinfo import pid_alive

REDIS_URL = "redis://127.0.0.1:6379/7"


def _fleet(panio, bench, tmp_path):
    """A worker of host "local" (board0's) on the bench's lab, and the environment of a command sharing its state
    directory and lab."""
    workers = Workers(tmp_path / "w", REDIS_URL)
    (tmp_path / "w").mkdir()
    workers.lab.write_text(bench.lab.read_text())  # board0, on this machine (host "local")
    worker = workers.start("local", concurrency=1)
    here = {**panio.env, "PANIO_STATE_DIR": str(tmp_path / "w" / "wstate"), "PANIO_LAB": str(workers.lab)}
    return workers, worker, here


def _panio(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PANIO, *args], env=env, check=True, capture_output=True, text=True, timeout=90)


def _stop(worker) -> None:
    os.killpg(worker.pid, signal.SIGTERM)
    worker.wait(timeout=30)


def test_a_stopping_worker_leaves_a_hand_started_capture_running(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", booted=True) as bench:
        workers, worker, here = _fleet(panio, bench, tmp_path)
        try:
            started = json.loads(_panio(here, "serial", "watch", "board0", "--json").stdout)  # by hand, no broker
            found = registry.daemons_anywhere({bench.boards()[0]["device"]})
            assert [f["pid"] for f in found] == [started["pid"]], found
            assert json.loads(open(found[0]["file"]).read())["started_by"]["kind"] == "command"
            _stop(worker)
            log = worker.log.read_text()
            assert f"left capture serial-board0 (pid {started['pid']}) running: started by command" in log, log
            assert "stopped capture" not in log, log
            assert pid_alive(started["pid"])
            _panio(here, "serial", "send", "board0", "echo still-captured-after-the-worker")
            wait_for(lambda: "still-captured-after-the-worker" in _panio(here, "serial", "log", "board0").stdout,
                     timeout_s=30)  # the log still grows: the capture still reads the board
        finally:
            workers.stop_all()
            drop_keys(REDIS_URL, workers.env["PANIO_REDIS_PREFIX"])


def test_a_stopping_worker_stops_the_capture_its_job_started(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", booted=True) as bench:
        workers, worker, here = _fleet(panio, bench, tmp_path)
        try:
            submitter = {**here, **workers.env}
            body = "[[steps]]\nname = 'capture'\nrun = 'serial watch ${target}'\n"
            job = json.loads(_panio(submitter, "job", "submit", job_file(tmp_path, body), "--target", "board0",
                                    "--json").stdout)["job_id"]
            wait_for(lambda: workers.store().job(job)["state"] not in ("queued", "running"), timeout_s=90)
            assert workers.store().job(job)["health"] == "complete", workers.store().job(job)
            found = registry.daemons_anywhere({bench.boards()[0]["device"]})
            assert len(found) == 1, found
            by = json.loads(open(found[0]["file"]).read())["started_by"]
            assert (by["kind"], by["pid"], by["job"]) == ("worker", worker.pid, job), by
            _stop(worker)
            wait_for(lambda: not pid_alive(found[0]["pid"]), timeout_s=10)
            assert f"stopped capture serial-board0 (pid {found[0]['pid']})" in worker.log.read_text()
        finally:
            workers.stop_all()
            drop_keys(REDIS_URL, workers.env["PANIO_REDIS_PREFIX"])
