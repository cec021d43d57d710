"""Device health through a real `panio worker` (Celery on the real Redis): the worker runs the target's health
check from the payload (it has no lab file), records health in the shared results database, and holds jobs
on a target in maintenance until an operator lifts it."""

from __future__ import annotations

import subprocess

import pytest

from conftest import PANIO
from jobhelp import job_file, receiver, stop, wait_for, wait_held  # noqa: F401 - receiver is a fixture
from peerhelp import SHARED_REDIS, Workers, drop_keys

CHECK = "name = 'b1-health'\n[[steps]]\nname = 'probe'\nrun = 'panio action run ${target} probe'\n"
PING = "target = 'b1'\n[[steps]]\nrun = 'panio ping ${target}'\n"


@pytest.fixture
def worker(tmp_path):
    workers = Workers(tmp_path, SHARED_REDIS, PANIO_VISIBILITY_TIMEOUT_S="3")
    try:
        workers.start("bench1")
        yield workers
    finally:
        workers.stop_all()
        drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


def test_worker_runs_health_checks_and_holds_jobs_in_maintenance(panio, tmp_path, worker, receiver):
    panio.env.update(worker.env)
    flag = tmp_path / "healthy"
    panio("init")
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("target", "add", "b1", "--host", "bench1")
    panio("action", "add", "probe", "-t", "b1", "--command", f"test -e {flag}")
    (tmp_path / "check.toml").write_text(CHECK)
    with panio.lab.open("a") as f:
        f.write(f'\n[targets.b1.health_check]\njob = "check.toml"\n\n[[notify]]\nwebhook = "{receiver.url}/w"\n')
    ping = job_file(tmp_path, PING)

    r = panio.fails("job", "submit", ping, "--wait", code=8)  # unknown: the worker checks first, and it fails
    assert "failed its health check" in r.err
    assert panio("target", "health", "b1", "--json").json()["health"] == "bad"
    flag.touch()
    r = panio("target", "health", "b1", "--check", "--json").json()  # through the broker, on the worker
    assert r["health"] == "good" and r["health_check_job"]["result"] == "passed"
    assert "worker bench1@" in r["set_by"]

    panio("target", "health", "b1", "--set", "maintenance", "--reason", "rewiring")
    proc = subprocess.Popen([PANIO, "job", "submit", ping, "--wait", "--json"], env=panio.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        queued = wait_for(lambda: [j for j in panio("job", "list", "--json").json() if j["state"] == "queued"], 60)
        wait_held(panio, queued[0]["id"])  # the worker holds it while the target is in maintenance
        assert proc.poll() is None and panio("job", "list", "--state", "running", "--json").json() == []
        panio("target", "health", "b1", "--set", "good", "--no-check")
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    # the worker, which has no lab file, notified from the payload: the failed check, then the job it held back
    told = [(b["event"], b.get("health"), b.get("set_by", "")) for b in receiver.bodies("/w")]
    assert ("health_changed", "bad", told[0][2]) == told[0] and told[0][2].startswith("worker bench1@")
    assert ("job_incomplete", "incomplete", "") in told
