"""Friction 9 of issue 17: a wedged capture under a job's lease, supervisors left as zombies, "worker worker".

* An operator may stop or restart the capture of a target a job leases only
  with ``--override --reason``; the override acts with the job's lease and is
  recorded in that job's history (``panio job status``).
* A capture supervisor started through a long-lived worker is reaped when it
  stops, not left a zombie until the worker exits.
* The lost-worker reason names the runner once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PANIO
from jobhelp import job_file, wait_for
from peerhelp import Workers, drop_keys
from serial_fixtures import Bench


@pytest.fixture
def bench(panio, tmp_path):
    b = Bench(panio, tmp_path)
    b.board("pico")
    yield b
    b.close()


@pytest.fixture
def leased(bench, panio, tmp_path):
    """A job (embedded, file lease) running on pico with capture on; yields its id."""
    panio("serial", "watch", "pico")
    # 300 s of pinging: the job holds its lease for the whole test however slow the machine (killed below)
    body = "[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 6000 --interval 0.05'\n"
    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, body), "--target", "pico"], env=panio.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        job = wait_for(lambda: next(iter(panio("job", "list", "--state", "running", "--json").json()), None),
                       timeout_s=30)
        yield job["id"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


def test_an_operator_stops_and_restarts_a_leased_capture_only_with_a_recorded_override(panio, bench, leased):
    r = panio.fails("serial", "stop", "pico", code=8)
    assert f"(job {leased})" in r.err
    panio.fails("serial", "stop", "pico", "--override", code=2)  # an override needs its reason
    panio.fails("serial", "stop", "pico", "--reason", "why", code=2)  # a reason goes with --override
    assert _capturing(bench)  # none of that stopped anything

    out = panio("serial", "stop", "pico", "--override", "--reason", "capture wedged: no bytes for 10 min").out
    assert f"overrode job {leased}'s lease (recorded: `panio job status {leased}`)" in out
    assert bench.discovery("pico") is None
    r = panio("serial", "watch", "pico", "--override", "--reason", "restart after the wedge", "--json").json()
    assert r["already_running"] is False and r["override"]["job_id"] == leased
    assert _capturing(bench)

    job = panio("job", "status", str(leased), "--json").json()
    assert [(o["command"], o["reason"], o["outcome"]) for o in job["overrides"]] == [
        ("serial stop", "capture wedged: no bytes for 10 min", {"ok": True}),
        ("serial watch", "restart after the wedge", {"ok": True})]
    assert all(o["by"].endswith("@" + os.uname().nodename) and o["holder"].startswith("panio job run@")
               for o in job["overrides"])
    assert "override " in panio("job", "status", str(leased)).out
    # input is not capture management: the job's lease still refuses it, and it has no override
    panio.fails("serial", "send", "pico", "hello", code=8)
    panio.fails("serial", "send", "pico", "hello", "--override", "--reason", "x", code=2)


def _capturing(bench) -> bool:
    """A live capture supervisor (read from its discovery file: a read command may be refused under a lease)."""
    from bench_agent.process import pid_alive

    info = bench.discovery("pico")
    return info is not None and pid_alive(info["pid"])


def test_without_a_lease_the_override_is_not_needed_and_not_recorded(panio, bench):
    panio("serial", "watch", "pico")
    r = panio("serial", "stop", "pico", "--override", "--reason", "just stopping", "--json").json()
    assert r["stopped"] is True and (r["override"]["job_id"], r["override"]["id"]) == (None, None)  # not recorded
    panio("serial", "watch", "pico")
    assert "no lease held the target when it acted (nothing overridden)" in panio(
        "serial", "stop", "pico", "--override", "--reason", "just stopping").out


# --- zombies -------------------------------------------------------------------------------------

REDIS_URL = "redis://127.0.0.1:6379/5"


def _zombie_children(pid: int) -> list[int]:
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == pid and stat[0] == "Z":
            out.append(int(entry))
    return out


def test_a_supervisor_started_through_a_worker_is_reaped_when_it_stops(panio, bench, tmp_path):
    workers = Workers(tmp_path, REDIS_URL)
    panio.env.update(workers.env)
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("host", "set", "bench1", "--transport", "celery")
    device = bench.sims["pico/console"].device  # pico, now owned by host bench1, reached through its worker
    panio("target", "rm", "pico")
    panio("target", "add", "pico", "--host", "bench1")
    panio("serial", "add", "console", "-t", "pico", "--device", device)
    try:
        worker = workers.start("bench1", concurrency=2)
        for _ in range(2):
            started = panio("serial", "watch", "pico", "--json", timeout=90).json()
            assert started["already_running"] is False
            panio("serial", "stop", "pico", timeout=90)
            wait_for(lambda: not Path(f"/proc/{started['pid']}").exists(), timeout_s=10)  # reaped: gone entirely
        assert _zombie_children(worker.pid) == []
    finally:
        workers.stop_all()
        drop_keys(REDIS_URL, workers.env["PANIO_REDIS_PREFIX"])


# --- the lost-worker reason ------------------------------------------------------------------------

def test_the_lost_worker_reason_names_the_runner_once(tmp_path):
    from bench_agent.leases.file_store import FileLeaseStore
    from bench_agent.jobs.reconcile import Reconciler, dead_after_s
    from bench_agent.results.store import ResultStore

    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    spec = {"lease_ttl_s": 2, "steps": [{"name": "a", "command": "panio ping t"}]}
    job_id = store.create_job("j", "t", "h", spec)
    assert store.take(job_id, "worker h@another-machine:4242", 0)
    assert store.claim(job_id, "worker h@another-machine:4242")
    store.set_fence(job_id, 7)
    with store.engine.begin() as c:
        c.execute(store.jobs.update().where(store.jobs.c.id == job_id)
                  .values(beat_at=time.time() - dead_after_s(spec) - 1))
    Reconciler(store, FileLeaseStore(tmp_path / "leases")).pass_()
    reason = store.job(job_id)["reason"]
    assert reason.startswith("worker h@another-machine:4242 lost: it died while the job ran")
    assert "worker worker" not in reason
