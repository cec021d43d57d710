"""Jobs through real `panio worker` processes (Celery on the real Redis), one queue per control host."""

from __future__ import annotations

import time

import pytest

from jobhelp import job_file, wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, use_lab

REDIS_URL = SHARED_REDIS
LONG = "lease_ttl_s = 2\n[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 6000 --interval 0.05'\n"
QUICK = "[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 3'\nexpect_output = 'seq=3'\n"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    b = Workers(tmp_path_factory.mktemp("bench"), REDIS_URL, PANIO_VISIBILITY_TIMEOUT_S="3")
    b.start("bench1")
    b.start("bench2")
    yield b
    b.stop_all()
    drop_keys(REDIS_URL, b.env["PANIO_REDIS_PREFIX"])


@pytest.fixture
def lab(panio, bench):
    use_lab(panio, bench)
    for host in ("bench1", "bench2", "bench3", "nobody"):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
    for target, host in (("b1a", "bench1"), ("b1b", "bench1"), ("b2a", "bench2"), ("b3a", "bench3"),
                         ("lost", "nobody")):
        panio("target", "add", target, "--host", host)
    return panio


def submit(panio, tmp_path, body, target, name="job.toml") -> int:
    return panio("job", "submit", job_file(tmp_path, body, name), "--target", target, "--json").json()["job_id"]


def done(panio, job_id: int, timeout_s: float = 60) -> dict:
    return wait_for(lambda: (j := panio("job", "status", str(job_id), "--json").json())["state"] == "done" and j,
                    timeout_s=timeout_s, every_s=0.2)


def test_jobs_go_to_the_worker_of_their_targets_host(lab, tmp_path):
    j1, j2 = submit(lab, tmp_path, QUICK, "b1a"), submit(lab, tmp_path, QUICK, "b2a")
    a, b = done(lab, j1), done(lab, j2)
    assert (a["health"], a["result"], b["health"], b["result"]) == ("complete", "passed", "complete", "passed")
    assert a["worker"].startswith("worker bench1@") and b["worker"].startswith("worker bench2@")
    # the step prints what `panio ping b1a` prints on the controller: the target and its host
    assert "b1a (bench1): seq=3" in lab("job", "logs", str(j1)).out


def test_job_run_with_a_broker_blocks_and_exits_like_ci(lab, tmp_path):
    fail = "[[steps]]\nrun = 'target show ${target}'\nexpect_output = 'no such text'\n"
    r = lab.fails("job", "run", job_file(tmp_path, fail), "--target", "b2a", code=14)
    assert "queued job" in r.out and "on host.bench2" in r.out
    r = lab("job", "run", job_file(tmp_path, QUICK, "q.toml"), "--target", "b1b", "--junit", str(tmp_path / "j.xml"))
    assert "complete, passed" in r.out and (tmp_path / "j.xml").exists()


def test_a_job_no_worker_starts_is_withdrawn_after_the_queue_timeout(lab, tmp_path):
    path = job_file(tmp_path, QUICK)
    started = time.monotonic()
    r = lab.fails("job", "run", path, "--target", "lost", "--queue-timeout-s", "1.5", code=4)
    assert time.monotonic() - started < 30
    assert "panio worker --host nobody" in r.err
    job = lab("job", "status", str(r.error["job"]), "--json").json()
    assert (job["state"], job["health"]) == ("done", "incomplete")


def test_two_jobs_for_one_target_run_one_after_the_other(lab, tmp_path):
    body = "[[steps]]\nrun = 'ping ${target} --count 10 --interval 0.05'\n"
    first, second = submit(lab, tmp_path, body, "b1a"), submit(lab, tmp_path, body, "b1a")
    a, b = done(lab, first), done(lab, second)
    assert a["result"] == b["result"] == "passed"
    x, y = sorted((a, b), key=lambda j: j["leased_at"])
    assert y["leased_at"] >= x["finished_at"] - 0.05, "the second job held the target while the first ran"
    assert y["fence"] > x["fence"]


def test_cancel_a_running_job_and_a_queued_one(lab, tmp_path):
    running = submit(lab, tmp_path, LONG, "b2a")
    wait_for(lambda: lab("job", "status", str(running), "--json").json()["state"] == "running", timeout_s=120)
    queued = submit(lab, tmp_path, QUICK, "lost", "q.toml")  # no worker serves host.nobody
    lab("job", "cancel", str(running))
    assert "canceled before it started" in lab("job", "cancel", str(queued)).out
    assert done(lab, running, 90)["health"] == "canceled"
    job = lab("job", "status", str(queued), "--json").json()
    assert (job["health"], job["steps"]) == ("canceled", [])


def test_a_rejected_job_queues_nothing(lab, tmp_path):
    before = len(lab("job", "list", "--limit", "1000", "--json").json())
    bad = "[[steps]]\nrun = 'panio flash ${target}'\n"
    lab.fails("job", "submit", job_file(tmp_path, bad), "--target", "b1a", code=5)
    lab.fails("job", "submit", job_file(tmp_path, QUICK), "--target", "ghost", code=3)
    assert len(lab("job", "list", "--limit", "1000", "--json").json()) == before


def test_runtime_commands_reach_a_host_through_its_celery_worker(lab):
    lab("host", "set", "bench2", "--transport", "celery")
    r = lab("ping", "b2a", "--count", "3", "--json").json()
    assert r["host"] == "bench2" and len(r["times_ms"]) == 3
    lab("host", "set", "nobody", "--transport", "celery")
    lab.env["PANIO_OP_WAIT_S"] = "1"
    start = time.monotonic()
    r = lab.fails("ping", "lost", code=4)  # no worker serves host.nobody: unreachable, bounded, not a hang
    assert "no answer from its worker" in r.err and time.monotonic() - start < 10
    assert "outcome" not in r.err  # ping only reads: nothing can have half-happened


def test_an_operation_is_served_while_every_job_thread_of_its_worker_is_busy(panio, tmp_path):
    """Issue 27: operations have a queue of their own, so an operator's command (or the scheduler's lab probe)
    reaches a worker whose every job thread runs a job, while the job runs: it used to wait for the job to end
    (`serial stop --override` meant for a running job always came after it)."""
    (tmp_path / "busy").mkdir()
    workers = Workers(tmp_path / "busy", REDIS_URL)
    use_lab(panio, workers)
    panio("host", "add", "busy", "--ssh", "ops@busy.invalid")
    panio("host", "set", "busy", "--transport", "celery")
    for t in ("ba", "bb"):
        panio("target", "add", t, "--host", "busy")
    jobs = []
    try:
        workers.start("busy", concurrency=1)
        jobs.append(submit(panio, tmp_path, LONG, "ba"))  # 300 s of pinging (canceled at the end) on the worker's one job thread
        jobs.append(submit(panio, tmp_path, LONG, "bb", "second.toml"))  # and one more queued behind it
        wait_for(lambda: panio("job", "status", str(jobs[0]), "--json").json()["state"] == "running", timeout_s=120)
        r = panio("ping", "bb", "--count", "1", "--json").json()
        assert r["host"] == "busy" and len(r["times_ms"]) == 1
        assert panio("job", "status", str(jobs[0]), "--json").json()["state"] == "running"  # answered meanwhile
    finally:
        for job in jobs:
            panio("job", "cancel", str(job), check=False)
        workers.stop_all()
        drop_keys(REDIS_URL, workers.env["PANIO_REDIS_PREFIX"])
