"""Issue 38 item 1: a control host holds no results-database URL; it reports, the controller's recorder records.

Real parts: the machine's Redis, a real `panio worker --host bench1` whose environment has no PANIO_RESULTS_URL
(its own signing key, CN bench1), a real `panio recorder` process, `panio job submit` / `job status` as an
operator runs them. A job's steps and verdict reach the results database only through the recorder; the
recorder killed with SIGKILL in the middle of a job loses nothing; reports forged with another host's key, for
another host's job or target, unsigned, replayed, with an old fencing token or malformed are refused, logged with
the host's name, and change nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import PANIO
from jobhelp import job_file, wait_for
from peerhelp import SHARED_REDIS, drop_keys, use_lab
from reporthelp import Peers

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")

QUICK = "[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 3'\nexpect_output = 'seq=3'\n"


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    p = Peers(tmp_path_factory.mktemp("reporting"))
    p.lab.write_text("")
    p.start("bench1")
    p.start_recorder()
    yield p
    p.stop_all()
    drop_keys(SHARED_REDIS, p.env["PANIO_REDIS_PREFIX"])


@pytest.fixture
def lab(panio, peers):
    use_lab(panio, peers)
    for host in ("bench1", "bench2"):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
    for target, host in (("b1a", "bench1"), ("b1b", "bench1"), ("b2a", "bench2")):
        panio("target", "add", target, "--host", host)
    return panio


def submit(panio, tmp_path, body: str, target: str) -> int:
    return panio("job", "submit", job_file(tmp_path, body, f"{uuid.uuid4().hex[:6]}.toml"), "--target", target,
                 "--json").json()["job_id"]


def done(panio, job_id: int, timeout_s: float = 60) -> dict:
    return wait_for(lambda: (j := panio("job", "status", str(job_id), "--json").json())["state"] == "done" and j,
                    timeout_s=timeout_s, every_s=0.2)


def test_a_worker_without_a_results_url_runs_a_job_the_recorder_records(lab, peers, tmp_path):
    worker = peers.procs[0]
    environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
    assert not any(v.startswith(b"PANIO_RESULTS_URL=") for v in environ)
    job_id = submit(lab, tmp_path, QUICK, "b1a")
    job = done(lab, job_id)
    assert (job["health"], job["result"]) == ("complete", "passed"), job
    assert job["worker"].startswith("worker bench1@") and job["fence"] is not None
    assert [(s["name"], s["status"]) for s in job["steps"]] == [("quick", "pass")]
    assert "b1a (bench1): seq=3" in lab("job", "logs", str(job_id)).out
    assert not (peers.root / "wstate" / "results.db").exists()  # the host made no database of its own
    assert peers.refusals() == []


def test_the_recorder_killed_mid_job_loses_nothing(lab, peers, tmp_path):
    store = peers.store()
    steps = "".join(f"[[steps]]\nname = 's{i}'\nrun = 'ping ${{target}} --count 15 --interval 0.05'\n"
                    for i in range(3))
    job_id = submit(lab, tmp_path, steps, "b1b")
    wait_for(lambda: store.job(job_id)["steps"], timeout_s=60)  # recorded: the first step runs
    peers.kill_recorder()
    wait_for(lambda: f"job {job_id}: complete passed" in peers.logs(), timeout_s=60)  # the host is done
    assert store.job(job_id)["state"] == "running"  # nothing recorded it: the reports wait in Redis
    peers.start_recorder()
    job = done(lab, job_id)
    assert (job["health"], job["result"]) == ("complete", "passed"), job
    assert [(s["name"], s["status"]) for s in job["steps"]] == [("s0", "pass"), ("s1", "pass"), ("s2", "pass")]
    assert all("seq=15" in s["output"] for s in store.job(job_id)["steps"])



def test_a_job_settled_as_lost_while_the_recorder_was_down_gets_its_real_verdict(lab, peers, tmp_path):
    """The host finished the job while the recorder was down, then died: a reader (`job status`) proves its runner
    dead (process gone, lease released) and settles the job as lost. The host's reports, recorded later under the
    job's fencing token, say what really happened, and win."""
    store = peers.store()
    body = "[[steps]]\nname = 'a'\nrun = 'ping ${target} --count 60 --interval 0.05'\n"
    job_id = submit(lab, tmp_path, body, "b1b")
    wait_for(lambda: store.job(job_id)["steps"], timeout_s=60)
    peers.kill_recorder()
    wait_for(lambda: f"job {job_id}: complete passed" in peers.logs(), timeout_s=60)
    worker = peers.procs[0]
    peers.kill(worker)
    try:
        lost = lab("job", "status", str(job_id), "--json").json()
        assert (lost["state"], lost["health"]) == ("done", "incomplete") and "lost" in lost["reason"], lost
        peers.start_recorder()
        job = wait_for(lambda: (j := store.job(job_id))["health"] == "complete" and j, timeout_s=30)
        assert (job["state"], job["result"]) == ("done", "passed"), job
        assert [(s["name"], s["status"]) for s in job["steps"]] == [("a", "pass")]
        assert "was settled as lost" in peers.rlog.read_text()
    finally:
        peers.procs.remove(worker)
        peers.start("bench1")  # for the tests after this one


def forge(peers: Peers, stream_host: str, key_host: str | None, job: int | None, kind: str, data: dict,
          fence: int | None = None, seq: int | None = None, body_host: str | None = None) -> None:
    """XADD a report on ``stream_host``'s stream, signed with ``key_host``'s key (None: unsigned)."""
    import redis
    import time

    from bench_agent.results import reports

    body = reports.body(body_host or stream_host, job, seq or time.time_ns() // 1000, kind, fence, data)
    entry = {"body": body}
    if key_host:
        entry["sig"] = reports.Signer(Path(peers.keys[key_host]["PANIO_SIGNING_KEY"])).sign(body)
    redis.Redis.from_url(SHARED_REDIS).xadd(reports.stream(peers.env["PANIO_REDIS_PREFIX"], stream_host), entry)


def test_forged_reports_are_refused_logged_and_change_nothing(lab, peers, tmp_path):
    import redis

    from bench_agent.results import reports

    store = peers.store()
    mine = submit(lab, tmp_path, QUICK, "b1a")
    mine_job = done(lab, mine)
    theirs = submit(lab, tmp_path, QUICK, "b2a")  # bench2 has no worker: it stays queued
    # a row for bench1 whose target is bench2's (only a database writer could make it)
    crossed = store.create_job("crossed", "b2a", "bench1", {"steps": []})
    before = {j: store.job(j) for j in (mine, theirs, crossed)}
    jobs_before = len(store.list_jobs(limit=1000))
    verdict = {"health": "complete", "result": "failed", "reason": "forged", "error": None, "steps": [],
               "artifacts": []}
    step = {"idx": 0, "step": {"name": "x", "command": "x", "status": "running"}, "done": []}
    started = {"worker": "worker bench1@forger:1"}
    cases = [
        (dict(stream_host="bench1", key_host="bench1", job=theirs, kind="started", data=started, fence=99),
         "queued for host bench2"),
        (dict(stream_host="bench2", key_host="bench1", job=theirs, kind="started",
              data={"worker": "worker bench2@forger:1"}, fence=99), "not bench2's"),
        (dict(stream_host="bench2", key_host=None, job=theirs, kind="finish", data=verdict), "unsigned"),
        (dict(stream_host="bench1", key_host="bench1", job=crossed, kind="started", data=started, fence=99),
         "host bench2's, not bench1's"),
        (dict(stream_host="bench1", key_host="bench1", job=mine, kind="finish", data=verdict,
              fence=mine_job["fence"], seq=1), "a replay"),
        (dict(stream_host="bench1", key_host="bench1", job=mine, kind="step_start", data=step,
              fence=mine_job["fence"] - 1), "not the job's current one"),
        (dict(stream_host="bench2", key_host="bench1", job=theirs, kind="finish", data=verdict,
              body_host="bench1"), "names host 'bench1', not the stream's"),
        (dict(stream_host="bench1", key_host="bench1", job=mine, kind="finish", data=verdict),
         "without a fencing token: the job is done"),
        (dict(stream_host="bench1", key_host="bench1", job=mine, kind="check", data={"name": "x", "target": "b1a"},
              fence=mine_job["fence"]), "the job is done under fencing token"),  # no check job made
    ]
    for n, (kw, why) in enumerate(cases, 1):
        forge(peers, **kw)
        wait_for(lambda: len(peers.refusals()) >= n, timeout_s=20)
        line = peers.refusals()[n - 1]
        assert why in line and f"from {kw['stream_host']}:" in line, (why, line)
    r = redis.Redis.from_url(SHARED_REDIS)
    r.xadd(reports.stream(peers.env["PANIO_REDIS_PREFIX"], "bench1"), {"body": b"{not json", "sig": b"x"})
    wait_for(lambda: len(peers.refusals()) > len(cases), timeout_s=20)
    assert "malformed" in peers.refusals()[-1]
    assert {j: store.job(j) for j in (mine, theirs, crossed)} == before
    assert len(store.list_jobs(limit=1000)) == jobs_before  # (a refused check made no job)
    for host in ("bench1", "bench2"):  # every entry acknowledged (and deleted): nothing retried forever
        name = reports.stream(peers.env["PANIO_REDIS_PREFIX"], host)
        wait_for(lambda: r.xlen(name) == 0 and r.xpending(name, "recorder")["pending"] == 0, timeout_s=20)


def test_a_cancel_reaches_a_host_without_the_database(lab, peers, tmp_path):
    body = "[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 600 --interval 0.05'\n"
    job_id = submit(lab, tmp_path, body, "b1a")
    store = peers.store()
    wait_for(lambda: store.job(job_id)["steps"], timeout_s=60)
    lab("job", "cancel", str(job_id))
    job = done(lab, job_id, timeout_s=30)
    assert job["health"] == "canceled", job
    assert json.loads(json.dumps(job["steps"]))[0]["status"] in ("error", "timeout", "canceled"), job["steps"]


def test_health_reaches_the_host_and_its_changes_come_back(lab, peers, tmp_path):
    import redis

    from bench_agent.results import reports

    r, key = redis.Redis.from_url(SHARED_REDIS), reports.health_key(peers.env["PANIO_REDIS_PREFIX"], "b1b")
    lab("target", "health", "b1b", "--set", "maintenance", "--reason", "reflashing", "--no-check")
    wait_for(lambda: b"maintenance" in (r.get(key) or b""), timeout_s=10)  # published within a second
    skip = 'on_unhealthy = "skip"\n' + QUICK
    # the recorder publishes the health the host's gate reads: a job on a target in maintenance is skipped there
    held = done(lab, submit(lab, tmp_path, skip, "b1b"))
    assert (held["health"], held["result"]) == ("incomplete", "skipped") and "maintenance" in held["reason"], held
    lab("target", "health", "b1b", "--set", "good", "--no-check")
    wait_for(lambda: b"good" in (r.get(key) or b""), timeout_s=10)
    wait_for(lambda: (j := done(lab, submit(lab, tmp_path, skip, "b1b")))["result"] == "passed" or print(j),
             timeout_s=60)
    # a job that ends incomplete (a lab failure: the target has no power hook) makes the target unknown, reported
    broken = done(lab, submit(lab, tmp_path, "[[steps]]\nrun = 'power on ${target}'\n", "b1b"))
    assert broken["health"] == "incomplete", broken
    health = wait_for(lambda: (h := lab("target", "health", "b1b", "--json").json())["health"] == "unknown" and h,
                      timeout_s=30)
    assert f"job {broken['id']} ended incomplete" in health["reason"] and "bench1" in health["set_by"], health


def test_a_job_on_the_simulated_board_records_its_steps_and_serial_log(panio, tmp_path):
    from simbench import sim_bench

    peers = Peers(tmp_path / "peers", hosts=("local",))
    with sim_bench(panio, tmp_path / "sim", booted=True) as bench:
        peers.lab = bench.lab  # the host's configuration and the controller's: the simulated bench's lab file
        panio.env.update(peers.env)
        try:
            peers.start("local")
            peers.start_recorder()
            body = ("[[steps]]\nname = 'watch'\nrun = 'serial watch ${target}'\n"
                    "[[steps]]\nname = 'uname'\nrun = \"serial transact ${target} 'uname -a' --until '# $'\"\n"
                    "expect_output = 'Linux'\n")
            job_id = submit(panio, tmp_path, body, "board0")
            job = done(panio, job_id, timeout_s=90)
            assert (job["health"], job["result"]) == ("complete", "passed"), (job, peers.logs()[-3000:])
            assert [(s["name"], s["status"]) for s in job["steps"]] == [("watch", "pass"), ("uname", "pass")]
            arts = peers.store().list_artifacts(job_id)
            assert any("Linux" in text for name, text in arts.items() if isinstance(text, str)), sorted(arts)
            listed = panio("job", "artifacts", str(job_id)).out  # what an operator sees: the serial log, recorded
            assert all(name in listed for name in arts), (listed, sorted(arts))
        finally:
            peers.stop_all()
            host_env = {**os.environ, **peers.env, "PANIO_STATE_DIR": str(peers.root / "wstate"),
                        "HOME": str(peers.root), "PANIO_LAB": str(bench.lab)}
            subprocess.run([PANIO, "serial", "stop", "board0"], env=host_env, capture_output=True, timeout=60)
            drop_keys(SHARED_REDIS, peers.env["PANIO_REDIS_PREFIX"])


def test_a_reporting_hosts_failed_job_is_told_by_the_recorder_with_its_triage(lab, peers, tmp_path, receiver):
    """The host cannot triage a failure (the job's history is the controller's): its runner asks the recorder,
    which sends ``job_failed`` with the triage made from the results database, to the channels of the job's
    compiled spec (the lab's `[[notify]]`), once the row says the job failed."""
    refused_before = len(peers.refusals())
    text = lab.lab.read_text()
    lab.lab.write_text(text + f'\n[[notify]]\nwebhook = "{receiver.url}/jobs"\non = ["job_failed"]\n')
    try:
        def run(body: str) -> int:  # the same job (by its name) twice: its last pass is what triage compares with
            path = job_file(tmp_path, body, "same.toml")
            return lab("job", "submit", path, "--target", "b1a", "--json").json()["job_id"]

        passed = run(QUICK)
        assert done(lab, passed)["result"] == "passed"
        job_id = run(QUICK.replace("expect_output = 'seq=3'", "expect_output = 'seq=99'"))
        job = done(lab, job_id)
        assert (job["health"], job["result"]) == ("complete", "failed"), job
        sent = wait_for(lambda: receiver.bodies("/jobs"), timeout_s=30)
    finally:
        lab.lab.write_text(text)
    assert len(sent) == 1, sent
    told = sent[0]
    assert (told["event"], told["job_id"], told["target"], told["fault"]) == ("job_failed", job_id, "b1a", "board")
    assert told["triage"] and not told["triage"].startswith("no triage"), told["triage"]
    assert told["last_pass"] == passed, told  # the controller's history: a host could not have said it
    assert peers.refusals()[refused_before:] == []
