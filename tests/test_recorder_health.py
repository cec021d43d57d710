"""Issue 38: what a reporting host (a worker without PANIO_RESULTS_URL) could not do before: run a target's health
check as a job of its own, and have its jobs reconciled by somebody.

Real parts: the machine's Redis, a fresh PostgreSQL schema as the results database, real `panio worker` processes
without PANIO_RESULTS_URL (each with its own signing key), a real `panio recorder`, `panio job submit` as an
operator runs it. The results database is read directly (never through `panio job status`, which would settle a
job itself).
"""

from __future__ import annotations

import os
import uuid

import pytest
import redis

from jobhelp import drop_pg_schema, job_file, pg_schema, wait_for
from peerhelp import SHARED_REDIS, drop_keys, use_lab
from reporthelp import Peers

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")

CHECK = "name = 'b-health'\n[[steps]]\nname = 'probe'\nrun = 'panio action run ${target} probe'\n"
PING = "[[steps]]\nname = 'ping'\nrun = 'ping ${target} --count 2'\n"


@pytest.fixture
def peers(tmp_path):
    url = pg_schema()
    p = Peers(tmp_path / "peers", PANIO_RESULTS_URL=url)
    p.lab.write_text("")
    yield p
    p.stop_all()
    drop_keys(SHARED_REDIS, p.env["PANIO_REDIS_PREFIX"])
    drop_pg_schema(url)


@pytest.fixture
def lab(panio, peers, tmp_path):
    use_lab(panio, peers)
    for host in ("bench1", "bench2"):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
    for target, host in (("b1a", "bench1"), ("b2a", "bench2")):
        panio("target", "add", target, "--host", host)
    return panio


def submit(panio, tmp_path, body: str, target: str, *extra: str) -> int:
    return panio("job", "submit", job_file(tmp_path, body, f"{uuid.uuid4().hex[:6]}.toml"), "--target", target,
                 *extra, "--json").json()["job_id"]


def settled(store, job_id: int, timeout_s: float = 90) -> dict:
    return wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=timeout_s, every_s=0.2)


def test_a_reporting_host_runs_the_targets_health_check_as_a_job_of_its_own(lab, peers, tmp_path):
    """Before: the host's store refused to make the check's job (only the controller gives job ids), so a job on a
    target with a health check ended incomplete. Now the recorder makes it from the check the controller compiled
    into the job, under the job's fencing token, and the host runs it first."""
    flag = tmp_path / "healthy"
    flag.touch()
    lab("action", "add", "probe", "-t", "b1a", "--command", f"test -e {flag}")
    (peers.root / "check.toml").write_text(CHECK)
    with peers.lab.open("a") as f:
        f.write('\n[targets.b1a.health_check]\njob = "check.toml"\n')
    peers.start("bench1")
    peers.start_recorder()
    store = peers.store()

    job = settled(store, submit(lab, tmp_path, PING, "b1a"))
    assert (job["health"], job["result"]) == ("complete", "passed"), job
    health = lab("target", "health", "b1a", "--json").json()
    assert health["health"] == "good" and health["set_by"] == "worker bench1", health
    check = store.job(health["job_id"])  # the check's own job, made by the recorder
    assert check["spec"]["kind"] == "health_check" and check["spec"]["check_of"] == job["id"], check["spec"]
    assert (check["state"], check["health"], check["result"], check["host"]) == ("done", "complete", "passed",
                                                                                "bench1"), check
    assert check["fence"] == job["fence"] and check["worker"] == job["worker"]
    assert [(s["name"], s["status"]) for s in check["steps"]] == [("probe", "pass")]

    flag.unlink()  # the board fails its check: the job behind it is held, the target bad
    lab("target", "health", "b1a", "--set", "unknown", "--reason", "rewired", "--no-check")
    held = settled(store, submit(lab, tmp_path, PING, "b1a"))
    assert (held["health"], held["result"]) == ("incomplete", "skipped"), held
    assert "failed its health check" in held["reason"], held
    assert wait_for(lambda: (h := lab("target", "health", "b1a", "--json").json())["health"] == "bad" and h)
    assert peers.refusals() == []


def test_the_recorder_reconciles_the_jobs_of_reporting_hosts(lab, peers, tmp_path):
    """Before: a reporting host's worker runs no reconciler (it reads no job rows), and nobody else did unless
    someone followed the job: a job whose broker message vanished stayed queued for ever. Now the recorder's
    reconciler sends it again. A job a host holds while it waits for its lease is the host's in the database
    (``taken``), so it is not sent again meanwhile."""
    peers.start_recorder()
    store = peers.store()
    job_id = submit(lab, tmp_path, PING, "b2a")  # bench2's worker is not running yet
    r = redis.Redis.from_url(SHARED_REDIS)
    queues = wait_for(lambda: [k for k in r.scan_iter(match=f"{peers.env['PANIO_REDIS_PREFIX']}*host.bench2*")
                               if r.type(k) == b"list"])
    r.delete(*queues)  # Redis lost it
    peers.start("bench2")
    job = settled(store, job_id)
    assert (job["health"], job["result"]) == ("complete", "passed"), job
    assert f"job {job_id}: its broker message vanished" in peers.rlog.read_text()

    # the next job waits for its lease past its runner's silence limit (lease_ttl_s 5: dead after 6 s)
    first = submit(lab, tmp_path, "[[steps]]\nrun = 'ping ${target} --count 300 --interval 0.05'\n", "b2a")
    wait_for(lambda: store.job(first)["state"] == "running", timeout_s=60)
    waiting = submit(lab, tmp_path, "lease_ttl_s = 5\n" + PING, "b2a")
    held = wait_for(lambda: (j := store.job(waiting))["worker"] and j, timeout_s=30)
    assert held["state"] == "queued" and held["worker"].startswith("worker bench2@"), held
    assert settled(store, first)["result"] == "passed"
    job = settled(store, waiting)
    assert (job["health"], job["result"]) == ("complete", "passed"), job
    again = [line for line in peers.rlog.read_text().splitlines() if "sent again" in line]
    assert not any(f"job {waiting}:" in line for line in again), again  # its runner was alive: never sent again
    assert peers.refusals() == []
