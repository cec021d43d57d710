"""Issue 45, hole 2's last gap: a host runs a job at most once, whatever the results database says.

A real `panio worker` on the real Redis, with message signing on; the target's power hook counts its cycles. A job
runs to completion; then its row is set back to `queued` in the results database, as whoever holds its URL could.
The worker's reconciler finds the job's message vanished and sends again the message the controller signed, kept
with the job: the host refuses it, from its own record of the jobs it started (``STATE/worker-<host>/jobs-started/``),
and the power hook has run once. A worker started afresh remembers. A job message sealed longer ago than its window
(``started.WINDOW_S``, the time its host keeps a record) is refused too: a record may be pruned only once the
message it guards could no longer run anyway.
"""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from jobhelp import job_file, wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, worker_lab

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")


@pytest.fixture
def host(tmp_path):
    workers = Workers(tmp_path / "peers", SHARED_REDIS)
    workers.root.mkdir()
    yield workers
    workers.stop_all()
    drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


def set_back_to_queued(host: Workers, job_id: int) -> None:
    """What a writer of the results database can do: the job that ran is queued again, as if it never started."""
    with sqlite3.connect(host.root / "results.db") as db:
        assert db.execute("UPDATE panio_jobs SET state = 'queued', health = NULL, result = NULL, reason = NULL, "
                          "error = NULL, worker = NULL, fence = NULL, started_at = NULL, leased_at = NULL, "
                          "finished_at = NULL, beat_at = NULL WHERE id = ?", (job_id,)).rowcount == 1


def refused_again(store, job_id: int) -> dict | None:
    job = store.job(job_id)
    return job if job["state"] == "done" and job["health"] == "incomplete" else None


def test_a_job_that_ran_set_back_to_queued_in_the_database_is_refused_by_its_host_even_after_a_restart(
        panio, host, tmp_path):
    cycles = tmp_path / "cycles"
    worker_lab(panio, host)
    panio("power", "set", "-t", "t1", "--cycle-cmd", f"sh -c 'echo cycled >> {cycles}'")
    worker = host.start("h1")
    job_id = panio("job", "submit", job_file(tmp_path, "[[steps]]\nrun = 'power-cycle ${target}'\n"),
                   "--target", "t1", "--json").json()["job_id"]
    store = host.store()
    wait_for(lambda: store.job(job_id)["state"] == "done", timeout_s=60, every_s=0.2)
    assert (store.job(job_id)["health"], store.job(job_id)["result"]) == ("complete", "passed"), store.job(job_id)
    assert cycles.read_text().splitlines() == ["cycled"]
    records = list((host.root / "wstate" / "worker-h1" / "jobs-started").iterdir())
    assert [r.name.split(".")[0] for r in records] == [str(job_id)]
    assert os.stat(records[0].parent).st_mode & 0o777 == 0o700

    for attempt in ("same worker", "restarted worker"):
        if attempt == "restarted worker":
            host.kill(worker)
            worker = host.start("h1")
        set_back_to_queued(host, job_id)
        job = wait_for(lambda: refused_again(store, job_id), timeout_s=60, every_s=0.2)
        assert job["error"]["error"] == "refused", (attempt, job)
        assert "started it before" in job["reason"], (attempt, job["reason"])
        log = worker.log.read_text()
        assert f"job {job_id}: its broker message vanished" in log and "sent again" in log, attempt
        refusals = [line for line in log.splitlines() if f"job {job_id} refused" in line]
        assert len(refusals) == 1 and "started it before" in refusals[0], (attempt, refusals)
        assert cycles.read_text().splitlines() == ["cycled"], f"the host ran the job again ({attempt})"
        assert [s["status"] for s in job["steps"]] == ["pass"], "the refusal recorded a run"  # the first run's step


def test_a_job_whose_message_was_lost_before_its_worker_took_it_runs_once_and_an_expired_message_is_refused(
        panio, host, tmp_path, monkeypatch):
    """The host's record does not stop a legitimate resend: the job never started, so it runs, once. A message the
    controller sealed longer ago than a record is kept is refused before anything runs."""
    import redis

    from bench_agent.jobs import sealed, started
    from bench_agent.jobs.worker import make_app

    cycles = tmp_path / "cycles"
    worker_lab(panio, host)
    panio("power", "set", "-t", "t1", "--cycle-cmd", f"sh -c 'echo cycled >> {cycles}'")
    job_id = panio("job", "submit", job_file(tmp_path, "[[steps]]\nrun = 'power-cycle ${target}'\n"),
                   "--target", "t1", "--json").json()["job_id"]
    assert redis.Redis.from_url(SHARED_REDIS).delete(f"{host.env['PANIO_REDIS_PREFIX']}celery:host.h1") == 1
    store = host.store()
    spec = store.job(job_id)["spec"]
    old = store.create_job("old", "t1", "h1", spec)
    for name, value in host.env.items():  # this process is the controller: it seals with the controller's key
        monkeypatch.setenv(name, value)
    app = make_app(SHARED_REDIS, host.env["PANIO_REDIS_PREFIX"])
    message = sealed.seal(app, {**spec, "job_id": old}, sealed_at=time.time() - started.WINDOW_S - 3600)
    store.keep_messages([(old, message)])
    sealed.publish(app, {**spec, "job_id": old}, message, f"panio-job-{old}")

    worker = host.start("h1")
    wait_for(lambda: all(store.job(i)["state"] == "done" for i in (job_id, old)), timeout_s=60, every_s=0.2)
    assert (store.job(job_id)["health"], store.job(job_id)["result"]) == ("complete", "passed"), store.job(job_id)
    assert (store.job(old)["health"], store.job(old)["error"]["error"]) == ("incomplete", "refused")
    assert "sealed" in store.job(old)["reason"] and "days ago" in store.job(old)["reason"], store.job(old)["reason"]
    assert store.job(old)["steps"] == []
    assert cycles.read_text().splitlines() == ["cycled"]
    assert f"job {old} refused" in worker.log.read_text()


def test_the_hosts_record_of_started_jobs_on_the_real_filesystem(tmp_path):
    """One record per job message, made once among the host's workers; withdrawn only when the job was not
    claimed; kept for the window and purged past it; in a folder no one else may write."""
    from bench_agent.errors import Refused
    from bench_agent.jobs.started import WINDOW_S, StartedJobs

    payload = {"job_id": 7, "sealed_at": time.time(), "target": "t1"}
    a, b = StartedJobs(tmp_path / "jobs-started"), StartedJobs(tmp_path / "jobs-started")
    assert not a.of(payload).before()
    assert a.of(payload).record() and not b.of(payload).record() and b.of(payload).before()
    other = {**payload, "sealed_at": payload["sealed_at"] + 1}  # job 7 of another results database: its own
    assert not b.of(other).before() and b.of(other).record()
    b.of(other).forget()
    assert not a.of(other).before()
    [kept] = [p for p in (tmp_path / "jobs-started").iterdir()]
    assert oct(kept.stat().st_mode & 0o777) == oct(0o600) and kept.stat().st_mtime >= payload["sealed_at"] + WINDOW_S
    assert oct((tmp_path / "jobs-started").stat().st_mode & 0o777) == oct(0o700)
    os.utime(kept, (time.time() - 1, time.time() - 1))  # its window is over
    StartedJobs(tmp_path / "jobs-started").of({**payload, "job_id": 8}).record()
    assert sorted(p.name.split(".")[0] for p in (tmp_path / "jobs-started").iterdir()) == ["8"]
    with pytest.raises(ValueError):
        a.of({**payload, "job_id": "../../x"})

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    with pytest.raises(Refused):
        StartedJobs(loose).of(payload).record()


def test_a_reporting_hosts_take_claim_and_verdict_live_in_the_one_pruned_record(tmp_path, prefix):
    """Issue 38: a host without a results database kept its takes, claims and verdicts in a folder of their own
    (``jobs/``) that nothing ever pruned. They are the record of the jobs it started now: one folder, kept for the
    messages' window and pruned with them."""
    from pathlib import Path

    import keyhelp
    from bench_agent.jobs.signing import KEY_ENV
    from bench_agent.jobs.started import WINDOW_S, StartedJobs
    from bench_agent.results.reporting import ReportingStore

    key = Path(keyhelp.worker_env()[KEY_ENV])
    one, two = (ReportingStore("h1", SHARED_REDIS, prefix, tmp_path, key) for _ in range(2))
    assert one.take(7, "worker h1@x:1", 0.0) and one.claim(7, "worker h1@x:1", fence=3)
    assert not two.claim(7, "worker h1@x:2", fence=3)  # one claim among the host's workers
    assert two.state(7) == "running" and one.finish(7, "complete", "passed") and two.state(7) == "done"
    folder = tmp_path / "jobs-started"
    marks = sorted(p.name for p in folder.iterdir())
    assert marks == ["7.done", "7.started", "7.taken"] and not (tmp_path / "jobs").exists()
    assert all(p.stat().st_mtime >= time.time() + WINDOW_S - 60 for p in folder.iterdir())
    for p in folder.iterdir():  # their window is over
        os.utime(p, (time.time() - 1, time.time() - 1))
    StartedJobs(folder).of({"job_id": 8, "sealed_at": time.time()}).record()  # the next record prunes them
    assert [p.name.split(".")[0] for p in folder.iterdir()] == ["8"]
    assert one.take(7, "worker h1@x:1", 0.0)  # (a message of job 7 is past its window by then: refused at intake)
