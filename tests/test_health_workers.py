"""Device health through a real `panio worker` (Celery on the real Redis): the worker runs the target's health
check from the payload (its action from the host's own lab file), records health in the shared results
database, and holds jobs on a target in maintenance until an operator lifts it."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from conftest import PANIO
from jobhelp import job_file, stop, wait_for
from peerhelp import SHARED_REDIS as REDIS_URL
from peerhelp import Workers, drop_keys, use_lab

CHECK = "name = 'b1-health'\n[[steps]]\nname = 'probe'\nrun = 'panio action run ${target} probe'\n"
PING = "target = 'b1'\n[[steps]]\nrun = 'panio ping ${target}'\n"


@pytest.fixture
def worker(tmp_path):
    b = Workers(tmp_path, REDIS_URL, PANIO_VISIBILITY_TIMEOUT_S="3")
    b.start("bench1")
    yield b
    b.stop_all()
    drop_keys(REDIS_URL, b.env["PANIO_REDIS_PREFIX"])


def test_worker_runs_health_checks_and_holds_jobs_in_maintenance(panio, tmp_path, worker, receiver):
    use_lab(panio, worker)
    flag = tmp_path / "healthy"
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
        wait_for(lambda: any(j["state"] == "queued" for j in panio("job", "list", "--json").json()), 30)
        time.sleep(2)
        assert proc.poll() is None and panio("job", "list", "--state", "running", "--json").json() == []
        panio("target", "health", "b1", "--set", "good", "--no-check")
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    # the worker notified the lab's channels (its host's file has them): the failed check, then the job it held back
    told = [(b["event"], b.get("health"), b.get("set_by", "")) for b in receiver.bodies("/w")]
    assert ("health_changed", "bad", told[0][2]) == told[0] and told[0][2].startswith("worker bench1@")
    assert ("job_incomplete", "incomplete", "") in told


def test_the_scheduler_re_checks_a_bad_board_through_its_worker(panio, tmp_path, worker):
    """Issue 27: a board an automatic check made bad comes back to good on its own with a broker too: `panio
    schedule serve` sends the re-check to the target's worker when it is due (this controller cannot reach
    bench1 itself: the worker asks the lab)."""
    use_lab(panio, worker)  # the worker serves the targets of the lab these commands edit
    flag = tmp_path / "healthy"
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("target", "add", "b1", "--host", "bench1")
    panio("action", "add", "probe", "-t", "b1", "--command", f"test -e {flag}")
    (tmp_path / "check.toml").write_text(CHECK)
    with panio.lab.open("a") as f:
        f.write('\n[targets.b1.health_check]\njob = "check.toml"\nretry_s = 1\nretry_max_s = 2\n')
    panio.fails("job", "submit", job_file(tmp_path, PING), "--wait", code=8)  # the worker's check fails: bad
    record = panio("target", "health", "b1", "--json").json()
    assert record["health"] == "bad" and record["recheck_at"] and record["failures"] == 1
    serve = subprocess.Popen([PANIO, "schedule", "serve"], env=panio.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: panio("target", "health", "b1", "--json").json()["failures"] >= 2, 60)  # still failing
        flag.touch()
        wait_for(lambda: panio("target", "health", "b1", "--json").json()["health"] == "good", 60)
        serve.send_signal(signal.SIGTERM)
        out, err = serve.communicate(timeout=60)
    finally:
        stop(serve)
    assert serve.returncode == 0, err
    assert "re-check of b1: health check job" in out and ": complete, passed" in out, out
    record = panio("target", "health", "b1", "--json").json()
    assert record["set_by"].startswith("worker bench1@") and record["recheck_at"] is None
