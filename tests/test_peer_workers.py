"""Real `panio worker` processes on a private redis-server: kill -9 mid-job, a broken lease, deadlines.

Issue 10, items 5, 7 and the deadline of item 4. The results database is read
directly (not through `panio job status`, which settles a dead runner's job
itself) to prove that a *live component* reconciles.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import PANIO
from jobhelp import job_file, wait_for
from peerhelp import REDIS, PrivateRedis, Workers, use_lab

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed (scripts/system-deps.sh)")

TTL_S = 2
LONG = (f"lease_ttl_s = {TTL_S}\n[[steps]]\nname = 'first'\nrun = 'ping ${{target}} --count 1'\n"
        "[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 600 --interval 0.05'\n"
        "[[steps]]\nname = 'after'\nrun = 'ping ${target} --count 1'\n")
QUICK = "[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 3'\nexpect_output = 'seq=3'\n"


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    root = tmp_path_factory.mktemp("peers")
    redis = PrivateRedis(root)
    redis.start()
    workers = Workers(root, redis.url)
    yield workers
    workers.stop_all()
    redis.stop()


@pytest.fixture
def lab(panio, peers):
    use_lab(panio, peers)
    for host in ("h1", "h2", "nobody"):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
    for target, host in (("t1", "h1"), ("t2", "h2"), ("lost", "nobody")):
        panio("target", "add", target, "--host", host)
    return panio


def submit(panio, tmp_path, body: str, target: str, name: str) -> int:
    return panio("job", "submit", job_file(tmp_path, body, name), "--target", target, "--json").json()["job_id"]


def row(store, job_id: int) -> dict:
    return store.job(job_id)


def test_a_worker_killed_mid_job(lab, peers, tmp_path):
    store = peers.store()
    doomed = peers.start("h1")
    first = submit(lab, tmp_path, LONG, "t1", "long.toml")
    wait_for(lambda: [s for s in row(store, first)["steps"] if s["name"] == "long" and s["status"] == "running"],
             timeout_s=60)
    second = submit(lab, tmp_path, QUICK, "t1", "quick.toml")
    wait_for(lambda: row(store, second)["worker"], timeout_s=30)  # the doomed worker holds it, waiting for the lease
    assert row(store, second)["worker"].endswith(f":{doomed.pid}")
    peers.start("h1")  # the host's second worker: alive when the first dies
    peers.kill(doomed)
    killed_at = time.time()

    # No client reads the job: the live worker reconciles it, and starts the stranded one once the board is free.
    nxt = wait_for(lambda: (j := row(store, second))["leased_at"] and j, timeout_s=60, every_s=0.1)
    print(f"stranded job started {nxt['leased_at'] - killed_at:.2f} s after kill -9 (bound: TTL {TTL_S} s + 5 s)")
    assert nxt["leased_at"] - killed_at <= TTL_S + 5
    dead = wait_for(lambda: (j := row(store, first))["state"] == "done" and j, timeout_s=30, every_s=0.1)
    assert dead["finished_at"] - killed_at <= TTL_S + 5
    assert (dead["health"], dead["error"]["exit"]) == ("incomplete", 4) and "lost" in dead["reason"]
    assert [(s["name"], s["status"]) for s in dead["steps"]] == [("first", "pass"), ("long", "error"),
                                                                  ("after", "skipped")]
    assert dead["steps"][1]["checks"][0]["got"] == "worker lost"

    done = wait_for(lambda: (j := row(store, second))["state"] == "done" and j, timeout_s=60)
    assert (done["health"], done["result"]) == ("complete", "passed")
    assert not done["worker"].endswith(f":{doomed.pid}")

    # The in-flight step shows in `job status` and in the JUnit report, as an error.
    status = lab("job", "status", str(first), "--json").json()
    assert status["steps"][1]["status"] == "error" and status["worker"] == dead["worker"]  # never re-run
    lab("job", "artifacts", str(first), "--out", str(tmp_path / "a"))
    junit = (tmp_path / "a" / "junit.xml").read_text()
    assert 'name="long"' in junit and "worker lost" not in junit.split('name="long"')[0]
    assert '<error message="error: finished"' in junit


# A consumer that took a job's message and is gone before starting it: kombu's Redis transport moved the message
# to its unacked set, where it stays until the visibility timeout (300 s). So it is after a worker killed with -9
# between delivery and taking the job, and after a worker whose broker connection dropped while the message
# waited to start (Celery discards its reserved messages then; their restore cannot reach a Redis that is away).
DROPPER = """
import sys, time
from kombu import Connection
with Connection(sys.argv[1], transport_options={"global_keyprefix": sys.argv[2]}) as conn:
    message = conn.default_channel.basic_get(sys.argv[3], no_ack=False)
    print("delivered" if message is not None else "empty", flush=True)
    time.sleep(600)
"""


def test_a_message_delivered_to_a_worker_that_never_started_it_is_sent_again(lab, peers, tmp_path):
    lab("host", "add", "h3", "--ssh", "ops@h3.invalid")
    lab("target", "add", "t3", "--host", "h3")
    job_id = submit(lab, tmp_path, f"lease_ttl_s = {TTL_S}\n" + QUICK, "t3", "quick.toml")  # no worker on h3 yet
    dropper = subprocess.Popen([sys.executable, "-c", DROPPER, peers.env["PANIO_BROKER"],
                                f"{peers.env['PANIO_REDIS_PREFIX']}celery:", "host.h3"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert dropper.stdout.readline().strip() == "delivered"
    finally:
        dropper.kill()
        dropper.wait()
    store = peers.store()
    worker = peers.start("h3")
    started = time.monotonic()
    job = wait_for(lambda: (j := row(store, job_id))["state"] == "done" and j, timeout_s=90, every_s=0.2)
    # the bound: the runner's silence bound (dead_after_s: TTL, at least 3 beats, + 1 s skew), not 300 s
    print(f"the dropped job ended {time.monotonic() - started:.1f} s after its host's worker started")
    assert (job["health"], job["result"]) == ("complete", "passed"), job
    assert f"job {job_id}: delivered to a worker" in worker.log.read_text()
    assert "that never started it" in worker.log.read_text()


def test_a_broken_lease_keeps_the_runners_verdict(lab, peers, tmp_path):
    peers.start("h2")
    body = LONG.replace(f"lease_ttl_s = {TTL_S}", "lease_ttl_s = 6")
    waiting = subprocess.Popen([PANIO, "job", "submit", job_file(tmp_path, body, "long.toml"), "--target", "t2",
                                "--wait"], env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        store = peers.store()
        job_id = wait_for(lambda: [j["id"] for j in store.list_jobs(target="t2") if j["state"] == "running"],
                          timeout_s=60)[0]
        wait_for(lambda: [s for s in row(store, job_id)["steps"] if s["status"] == "running" and s["name"] == "long"],
                 timeout_s=30)
        lab("lease", "break", "t2")
        for _ in range(6):  # readers, as eager as they like, never write the verdict of a live runner
            lab("job", "status", str(job_id), "--json")
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    job = row(store, job_id)
    assert (job["health"], job["error"]["exit"]) == ("incomplete", 13), job
    assert "lease lost" in job["reason"] and "worker" not in job["reason"]
    assert waiting.returncode == 13, err  # the follower exits with the runner's own verdict


def test_job_run_deadline_stops_a_running_job(lab, peers, tmp_path):
    peers.start("h2")
    started = time.monotonic()
    r = lab.fails("job", "run", job_file(tmp_path, LONG, "long.toml"), "--target", "t2", "--deadline-s", "4",
                  code=22)
    assert time.monotonic() - started < 4 + 20
    job = lab("job", "status", str(r.error["job"]), "--json").json()
    assert job["health"] == "timed_out" and "deadline" in job["reason"]


def test_job_run_deadline_withdraws_a_job_no_worker_starts(lab, tmp_path):
    started = time.monotonic()
    r = lab.fails("job", "run", job_file(tmp_path, QUICK, "q.toml"), "--target", "lost", "--deadline-s", "2",
                  code=22)
    assert time.monotonic() - started < 15
    job = lab("job", "status", str(r.error["job"]), "--json").json()
    assert (job["state"], job["health"]) == ("done", "timed_out") and "before the job started" in job["reason"]


def test_embedded_job_run_deadline(panio, tmp_path):
    panio("init")
    panio("target", "add", "here")
    started = time.monotonic()
    r = panio.fails("job", "run", job_file(tmp_path, LONG, "long.toml"), "--target", "here", "--deadline-s", "3",
                    code=22)
    assert time.monotonic() - started < 3 + 15
    assert "timed out" in r.err


def test_embedded_job_run_killed_mid_step_is_settled_by_a_reader(panio, tmp_path):
    import signal

    from bench_agent.results.store import ResultStore

    panio("init")
    panio("target", "add", "here")
    run = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, LONG, "long.toml"), "--target", "here"],
                           env=panio.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    store = wait_for(lambda: (tmp_path / "state" / "results.db").exists()
                     and ResultStore(f"sqlite:///{tmp_path / 'state' / 'results.db'}"), timeout_s=30)
    wait_for(lambda: [s for j in store.list_jobs() for s in store.job(j["id"])["steps"]
                      if s["name"] == "long" and s["status"] == "running"], timeout_s=60)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=10)
    job = panio("job", "status", "1", "--json").json()  # no broker, no worker: the reader is the only one left
    assert (job["state"], job["health"]) == ("done", "incomplete") and "lost" in job["reason"]
    assert [s["status"] for s in job["steps"]] == ["pass", "error", "skipped"]


def test_embedded_suite_deadline(panio, tmp_path):
    panio("init")
    panio("target", "add", "here")
    job_file(tmp_path, LONG, "a.toml")
    job_file(tmp_path, LONG, "b.toml")
    suite = job_file(tmp_path, "jobs = ['a.toml', 'b.toml']\ntargets = ['here']\n", "suite.toml")
    started = time.monotonic()
    r = panio.fails("suite", "run", suite, "--deadline-s", "4", code=22)
    assert time.monotonic() - started < 4 + 20
    jobs = panio("job", "list", "--json").json()
    assert sorted(j["health"] for j in jobs) == ["timed_out", "timed_out"], jobs
    assert any("before the job started" in j["reason"] for j in jobs), jobs
    assert "suite" in r.err
