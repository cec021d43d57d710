"""Redis restarted during a suite: no job lost, none run twice (a private redis-server, AOF on)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import PANIO
from jobhelp import job_file, stop, wait_for
from peerhelp import REDIS, PrivateRedis, Workers, worker_lab

STEPS = "".join(f"[[steps]]\nname = 's{i}'\nrun = 'ping ${{target}} --count 4 --interval 0.1'\n" for i in range(3))


@pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed")
def test_redis_restarted_during_a_suite(panio, tmp_path):
    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    workers = Workers(tmp_path, redis.url, PANIO_VISIBILITY_TIMEOUT_S="3")
    worker_lab(panio, workers, host="bench1", targets=("b1a", "b1b"))
    job_file(tmp_path, "name = 'one'\n" + STEPS, "one.toml")
    job_file(tmp_path, "name = 'two'\n" + STEPS, "two.toml")
    suite = job_file(tmp_path, "jobs = ['one.toml', 'two.toml']\ntargets = ['b1a', 'b1b']\n", "suite.toml")
    run = None
    try:
        worker = workers.start("bench1", concurrency=4)
        run = subprocess.Popen([PANIO, "suite", "run", suite, "--json"], env=panio.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "job step start" in worker.log.read_text(), timeout_s=30, every_s=0.05)
        redis.restart(down_s=0.5)
        out, err = run.communicate(timeout=120)
    finally:
        if run is not None:
            stop(run)
        workers.stop_all()
        redis.stop()
    jobs = panio("job", "list", "--json").json()
    assert len(jobs) == 4 and all(j["state"] == "done" for j in jobs), jobs  # none lost
    text = worker.log.read_text()
    # none run twice: each job was leased once, and each step started at most once a job (a resend of a message
    # the restart lost logs under ``-again-``)
    for i in (1, 2, 3):
        assert len(re.findall(rf"\]: job step start: {i}/3 ", text)) <= len(jobs), text
    for j in jobs:
        assert len(re.findall(rf"\]: job {j['id']}: leased", text)) == 1, text
        assert j["health"] == "complete" or "lease" in j["reason"] or "unreachable" in j["reason"].lower(), j
    assert all(j["result"] == "passed" for j in jobs), jobs  # Redis calls ride out a short restart
    assert "Traceback" not in text and "CRITICAL" not in text, text  # an ack the restart lost: one warning line


@pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed")
def test_a_channel_keeps_one_client_per_connection_pool(tmp_path):
    """kombu built a Redis client for every ack and every delivery's bookkeeping; panio's transport keeps one per
    pool, and a new one once kombu drops the pool (the connection went)."""
    from kombu import Connection

    from bench_agent.jobs.kombu_redis import PATH

    redis = PrivateRedis(tmp_path)
    redis.start()
    try:
        with Connection(redis.url, transport=PATH) as conn:
            channel = conn.default_channel
            first = channel._create_client()
            assert channel._create_client() is first and first.connection_pool is channel.pool
            with channel.conn_or_acquire() as client:
                assert client is first and client.ping()
            channel._disconnect_pools()
            again = channel._create_client()
            assert again is not first and again.connection_pool is channel.pool and again.ping()
            assert channel._create_client(asynchronous=True) is not again  # the async pool's: kombu's as before
    finally:
        redis.stop()
