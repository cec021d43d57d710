"""Which results-database writes wait for the disk, a step's start that reads the cancel as it writes, and a
suite's jobs recorded together and sent (real SQLite, real PostgreSQL, a real refusing broker address)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bench_agent.errors import Unreachable
from bench_agent.results.store import ResultStore
from jobhelp import drop_pg_schema, pg_schema


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        yield ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
        return
    url = pg_schema()
    try:
        yield ResultStore(url)
    finally:
        drop_pg_schema(url)


def test_postgresql_waits_for_the_disk_for_a_verdict_not_for_the_writes_on_the_way(tmp_path):
    url = pg_schema()
    try:
        store = ResultStore(url)
        with store.single.connect() as durable, store.relaxed_single.connect() as relaxed:
            assert durable.execute(sa.text("SHOW synchronous_commit")).scalar() == "on"
            assert relaxed.execute(sa.text("SHOW synchronous_commit")).scalar() == "off"
            # the URL's own options (here: the schema) hold on the relaxed connections too
            assert relaxed.execute(sa.text("SHOW search_path")).scalar() == url.rsplit("%3D", 1)[1]
        job_id = store.create_job("j", "t", None, {"steps": []})
        assert store.take(job_id, "w", 0.0) and store.claim(job_id, "w", fence=3)
        assert store.start_step(job_id, 0, {"name": "a", "command": "panio ping t", "status": "running"})
        store.add_artifact(job_id, "serial-console.log", "boot\n")
        assert store.finish(job_id, "complete", "passed", "all steps passed",
                            steps=[(0, {"name": "a", "command": "panio ping t", "status": "pass", "exit_status": 0})])
        job = store.job(job_id)
        assert (job["state"], job["fence"], [s["status"] for s in job["steps"]]) == ("done", 3, ["pass"])
        assert store.list_artifacts(job_id) == {"serial-console.log": "boot\n"}
    finally:
        drop_pg_schema(url)


def test_a_step_does_not_start_once_its_job_is_canceled_and_what_finished_is_kept(store):
    job_id = store.create_job("j", "t", None, {"steps": []})
    assert store.start_step(job_id, 0, {"name": "a", "command": "c", "status": "running"})
    assert store.start_step(job_id, 0, {"name": "a", "command": "c", "status": "running"})  # again: an update
    store.request_cancel(job_id)
    done = [(0, {"name": "a", "command": "c", "status": "pass", "exit_status": 0, "output": "ok"})]
    assert not store.start_step(job_id, 1, {"name": "b", "command": "c", "status": "running"}, done)
    assert [(s["idx"], s["status"], s["output"]) for s in store.job(job_id)["steps"]] == [(0, "pass", "ok")]


def test_jobs_recorded_together_are_sent_only_when_published(store):
    ids = store.create_jobs([("j", "t1", None, {"via": "broker"}), ("j", "t2", None, {"via": "broker"})])
    assert [store.job(i)["sent_at"] for i in ids] == [None, None]  # a reconciler cannot call them vanished yet
    assert store.mark_sent(ids)
    assert all(store.job(i)["sent_at"] for i in ids)
    one = store.create_job("j", "t3", None, {"via": "broker"})  # one job: published right after, sent now
    assert store.job(one)["sent_at"] is not None
    assert store.job(store.create_job("j", "t4", None, {}))["sent_at"] is None  # run here: never sent


def test_a_broker_that_refuses_a_suites_job_ends_it_and_every_one_after_it(tmp_path):
    from bench_agent.jobs.worker import make_app
    from controller.jobs import remote

    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    ids = store.create_jobs([("j", f"t{i}", None, {"via": "broker"}) for i in range(3)])
    payloads = [{"job_id": i, "target": f"t{n}", "target_config": {}} for n, i in enumerate(ids)]
    app = make_app("redis://127.0.0.1:1/0", insecure=True)  # nothing listens on port 1
    app.conf.broker_connection_timeout = 1
    with pytest.raises(Unreachable):
        remote.publish_all(app, store, payloads)
    jobs = [store.job(i) for i in ids]
    assert [(j["state"], j["health"]) for j in jobs] == [("done", "incomplete")] * 3
    assert all(j["reason"].startswith("not queued") for j in jobs)
    assert [j["sent_at"] for j in jobs] == [None] * 3


def test_a_fence_store_remembers_its_high_water_mark_and_reads_again_once_another_claimed_higher(tmp_path):
    from bench_agent.leases.fences import FenceStore

    url = f"sqlite:///{tmp_path / 'r.db'}"
    mine, other = FenceStore(url), FenceStore(url)  # two processes, two hosts
    assert mine.claim("pico", 5) and mine.high("pico") == 5
    assert other.claim("pico", 9)
    assert mine.high("pico") == 5  # remembered, no read: lower than the real mark is safe, the claim decides
    assert not mine.claim("pico", 6)  # refused: 9 was claimed
    assert mine.high("pico") == 9  # read again
    assert mine.claim("pico", 10) and other.high("pico") == 9 and not other.claim("pico", 10)


def test_after_a_redis_restart_a_lease_goes_above_a_token_another_process_claimed(tmp_path):
    """The worst case of a remembered mark: Redis forgot its counter and another host claimed higher meanwhile.
    The first token offered is refused by the durable mark; the next one is above it."""
    import os

    from bench_agent.leases import base as leases
    from bench_agent.leases import redis_store as redis_leases
    from bench_agent.leases.fences import FenceStore
    from peerhelp import REDIS, PrivateRedis

    if not os.path.exists(REDIS):
        pytest.skip("redis-server not installed (scripts/system-deps.sh)")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    redis = PrivateRedis(tmp_path)
    redis.start()
    try:
        store = redis_leases.RedisLeaseStore(redis.url, "t:", FenceStore(url))
        a = leases.acquire(store, "pico", {"holder": "a"}, ttl_s=30, wait_s=5)
        a.release()
        assert FenceStore(url).claim("pico", a.token + 7)  # another host, while this Redis loses its data:
        store.r.flushall()
        b = leases.acquire(store, "pico", {"holder": "b"}, ttl_s=30, wait_s=5)
        assert b.token > a.token + 7
        b.release()
    finally:
        redis.stop()


def _statements(store) -> list[str]:
    """Every SQL statement ``store`` sends from now on (its relaxed and autocommit engines are views of its engine:
    they share its events)."""
    seen: list[str] = []
    sa.event.listen(store.engine, "before_cursor_execute", lambda *a: seen.append(a[2].split()[0].upper()))
    return seen


def test_finished_steps_ride_with_the_next_start_and_the_verdict(store):
    job_id = store.create_job("j", "t", None, {"steps": []})
    assert store.take(job_id, "w", 0.0) and store.claim(job_id, "w", fence=1)
    sent = _statements(store)
    done = [(i, {"name": f"s{i}", "command": "c", "status": "pass", "exit_status": 0, "output": f"out {i}"})
            for i in range(2)]
    assert store.start_step(job_id, 2, {"name": "s2", "command": "c", "status": "running"}, done)
    last = [(2, {"name": "s2", "command": "c", "status": "fail", "exit_status": 1, "output": "bad"})]
    assert store.finish(job_id, "complete", "failed", "failed: s2", steps=last)
    writes = list(sent)
    steps = store.job(job_id)["steps"]
    assert [(s["idx"], s["status"], s["output"]) for s in steps] == [(0, "pass", "out 0"), (1, "pass", "out 1"),
                                                                     (2, "fail", "bad")]
    if store.engine.dialect.name == "postgresql":  # one statement each, the records in its WITH
        assert writes == ["WITH", "WITH"], writes
    # a verdict that comes too late (the job is done) changes nothing of it, but the records are still kept
    late = [(3, {"name": "s3", "command": "c", "status": "pass", "exit_status": 0})]
    assert not store.finish(job_id, "incomplete", None, "late", steps=late)
    job = store.job(job_id)
    assert (job["health"], job["result"], len(job["steps"])) == ("complete", "failed", 4)


def test_a_claim_raises_the_targets_fence_mark_with_the_job_in_one_statement(store):
    from bench_agent.leases.fences import FenceStore

    FenceStore(store.url).claim("pico", 5)  # the target's first lease makes its mark's row
    first, second, third = store.create_jobs([("j", "pico", None, {})] * 3)
    sent = _statements(store)
    assert store.claim_fenced(first, "w", "pico", 6) == (True, True)
    if store.engine.dialect.name == "postgresql":  # the mark and the claim in one durable statement
        assert sent == ["WITH"], sent
    job = store.job(first)
    assert (job["state"], job["worker"], job["fence"]) == ("running", "w", 6)
    assert store.claim_fenced(second, "w", "pico", 6) == (False, False)  # not above the mark: nothing claimed
    assert store.job(second)["state"] == "queued"
    assert store.claim_fenced(first, "w", "pico", 7) == (True, False)  # the mark rises; a running job stays
    assert store.claim_fenced(third, "w", "nothing-yet", 1) == (False, False)  # no row: FenceStore.claim makes it
    assert FenceStore(store.url).high("pico") == 7 and store.job(first)["fence"] == 6


def test_the_verdict_carries_the_serial_log_and_the_last_step(store):
    job_id = store.create_job("j", "t", None, {"steps": []})
    assert store.take(job_id, "w", 0.0) and store.claim(job_id, "w", fence=1)
    sent = _statements(store)
    last = [(0, {"name": "s0", "command": "c", "status": "pass", "exit_status": 0, "output": "ok"})]
    logs = [("serial-console.log", "boot\nlogin: \n"), ("serial-debug.log", "dbg\n")]
    assert store.finish(job_id, "complete", "passed", "all steps passed", steps=last, artifacts=logs)
    if store.engine.dialect.name == "postgresql":
        assert sent == ["WITH"], sent
    job = store.job(job_id)
    assert (job["state"], job["result"], [s["output"] for s in job["steps"]]) == ("done", "passed", ["ok"])
    assert store.list_artifacts(job_id) == dict(logs)


def test_a_lease_claims_the_job_with_its_token_and_a_refused_token_claims_nothing(tmp_path):
    """The runner's road (``leases.acquire(claim=...)``): the target's first lease makes the mark's row and the
    runner claims the job itself; later ones claim it with the token in one statement. A token the durable mark
    refuses (Redis forgot its counter, another host claimed higher) claims no job; the next token does."""
    import os

    from bench_agent.leases import base as leases
    from bench_agent.leases import redis_store as redis_leases
    from bench_agent.leases.fences import FenceStore
    from peerhelp import REDIS, PrivateRedis

    if not os.path.exists(REDIS):
        pytest.skip("redis-server not installed (scripts/system-deps.sh)")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store, redis = ResultStore(url), PrivateRedis(tmp_path)
    redis.start()
    try:
        leasing = redis_leases.RedisLeaseStore(redis.url, "t:", FenceStore(url))
        ids = store.create_jobs([("j", "pico", None, {})] * 3)

        def take(job_id: int) -> leases.Lease:
            return leases.acquire(leasing, "pico", {"holder": "w"}, ttl_s=30, wait_s=5, durable_fence=False,
                                  claim=lambda target, token: store.claim_fenced(job_id, "w", target, token))

        first = take(ids[0])
        assert first.claimed is None and store.job(ids[0])["state"] == "queued"  # no row yet: claimed apart
        first.release()
        second = take(ids[1])
        assert second.claimed is True and store.job(ids[1])["fence"] == second.token == first.token + 1
        second.release()
        assert FenceStore(url).claim("pico", second.token + 7)  # another host, while this Redis loses its data
        leasing.r.flushall()
        third = take(ids[2])
        assert third.claimed is True and third.token > second.token + 7
        assert store.job(ids[2])["fence"] == third.token
        third.release()
    finally:
        redis.stop()
