"""Issue 43: a job's cancel and its own deadline end its runner's wait for Redis between steps.

Between two steps a job's runner checks its lease; with Redis away it waits, for as long as the lease's TTL may
still hold it (a Redis restarted with its data kept still has the lease). A real `panio worker`, a private
redis-server (AOF) as its broker and lease store, which the test stops right as a job's first step ends (the
step's action waits for the test's ``go`` file). The lease's TTL is long (60 s), so the wait would last ~40 s or
more: `panio job cancel` ends it within seconds (``canceled``), and so does the job's ``timeout_s``
(``timed_out``); before, both waited out the TTL and the job ended "lease lost".
"""

from __future__ import annotations

import os
import time

import pytest

from jobhelp import job_file, wait_for
from peerhelp import REDIS, PrivateRedis

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed (scripts/system-deps.sh)")

JOB = """lease_ttl_s = 60
{timeout}
[[steps]]
name = 'hold'
run = 'action run ${{target}} hold'
[[steps]]
name = 'after'
run = 'ping ${{target}} --count 1'
"""
WAITING = "lease store: Redis unreachable since"


def test_a_cancel_and_the_jobs_deadline_end_the_wait_for_redis_between_steps(panio, tmp_path):
    from peerhelp import Workers, worker_lab

    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    workers = Workers(tmp_path, redis.url)
    go, asked = tmp_path / "go", tmp_path / "asked"
    hold = tmp_path / "hold.sh"
    hold.write_text(f"#!/bin/sh\ntouch {asked}\nwhile [ ! -e {go} ]; do sleep 0.05; done\n")
    hold.chmod(0o755)
    try:
        worker_lab(panio, workers)
        panio("action", "add", "hold", "-t", "t1", "--command", str(hold))
        workers.start("h1")
        store = workers.store()

        def between_steps(name: str, timeout: str) -> int:
            """Submit a job; stop Redis while its first step runs, then let that step end: the runner waits."""
            go.unlink(missing_ok=True)
            asked.unlink(missing_ok=True)
            said = workers.logs().count(WAITING)
            job_id = panio("job", "submit", job_file(tmp_path, JOB.format(timeout=timeout), name), "--target", "t1",
                           "--json").json()["job_id"]
            wait_for(asked.exists, timeout_s=60)
            redis.stop()
            go.touch()
            wait_for(lambda: workers.logs().count(WAITING) > said, timeout_s=30)  # the runner waits for Redis
            return job_id

        # a cancel, as `panio job cancel` records it, ends the wait within a poll (the TTL would hold it ~40 s)
        job_id = between_steps("canceled.toml", "")
        panio("job", "cancel", str(job_id))
        asked_at = time.time()
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=60)
        assert done["health"] == "canceled", (done["reason"], workers.logs()[-3000:])
        assert done["finished_at"] - asked_at < 5, (done["finished_at"] - asked_at, done["reason"])
        assert [s["status"] for s in done["steps"]] == ["pass", "skipped"], done["steps"]
        redis.start()

        # the job's own timeout_s runs out during the wait: timed out then, not "lease lost" once the TTL ran out
        job_id = between_steps("deadline.toml", "timeout_s = 8")
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=60)
        assert done["health"] == "timed_out", (done["reason"], workers.logs()[-3000:])
        assert done["finished_at"] - done["started_at"] < 8 + 3, (done["finished_at"] - done["started_at"])
        assert [s["status"] for s in done["steps"]] == ["pass", "skipped"], done["steps"]
        redis.start()

        # Redis back: the worker runs the next job as ever, and nothing ran twice
        job_id = panio("job", "submit", job_file(tmp_path, "[[steps]]\nrun = 'ping ${target}'\n", "after.toml"),
                       "--target", "t1", "--json").json()["job_id"]
        done = wait_for(lambda: (j := store.job(job_id))["state"] == "done" and j, timeout_s=90)
        assert (done["health"], done["result"]) == ("complete", "passed"), done["reason"]
        assert all(p.poll() is None for p in workers.procs)
    finally:
        go.touch()
        workers.stop_all()
        redis.stop()
