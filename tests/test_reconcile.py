"""The reconciler's proof of death for a runner on another machine (beat + lease), on SQLite and real Redis."""

from __future__ import annotations

import time
import uuid

import pytest

from bench_agent.leases.redis_store import RedisLeaseStore
from bench_agent.jobs.reconcile import Reconciler, dead_after_s
from bench_agent.results.store import ResultStore

REDIS_URL = "redis://127.0.0.1:6379/5"
SPEC = {"lease_ttl_s": 2, "steps": [{"name": "a", "command": "panio ping t"}, {"name": "b", "command": "panio x"}]}


@pytest.fixture
def world(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    leases = RedisLeaseStore(REDIS_URL, f"rec-{uuid.uuid4().hex[:8]}:")
    try:
        leases.current("probe")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"Redis not available at {REDIS_URL}: {exc}")
    yield store, leases
    for key in leases.r.scan_iter(match=f"{leases.prefix}*"):
        leases.r.delete(key)


def running_elsewhere(store, beat_age_s: float, fence: int) -> int:
    job_id = store.create_job("j", "t", "h", SPEC)
    assert store.take(job_id, "worker h@another-machine:4242", 0)
    assert store.claim(job_id, "worker h@another-machine:4242")
    store.set_fence(job_id, fence)
    store.record_step(job_id, 0, {"name": "a", "command": "panio ping t", "status": "running"})
    with store.engine.begin() as c:
        c.execute(store.jobs.update().where(store.jobs.c.id == job_id).values(beat_at=time.time() - beat_age_s))
    return job_id


def test_a_silent_runner_elsewhere_whose_lease_is_gone_is_dead(world):
    store, leases = world
    job_id = running_elsewhere(store, dead_after_s(SPEC) + 1, fence=7)
    Reconciler(store, leases).pass_()
    job = store.job(job_id)
    assert (job["state"], job["health"], job["error"]["exit"]) == ("done", "incomplete", 4)
    assert [(s["name"], s["status"]) for s in job["steps"]] == [("a", "error"), ("b", "skipped")]


def test_a_runner_elsewhere_that_still_beats_is_left_alone_even_without_its_lease(world):
    store, leases = world
    job_id = running_elsewhere(store, 0.2, fence=7)  # e.g. after `panio lease break`: the runner decides
    Reconciler(store, leases).pass_()
    assert store.job(job_id)["state"] == "running"


def test_a_silent_runner_elsewhere_that_holds_its_lease_is_left_alone(world):
    store, leases = world
    lease = leases.try_acquire("t", {"holder": "worker h@another-machine:4242"}, 30)
    job_id = running_elsewhere(store, dead_after_s(SPEC) + 5, fence=lease.token)
    Reconciler(store, leases).pass_()
    assert store.job(job_id)["state"] == "running"
    lease.release()
    Reconciler(store, leases).pass_()
    assert store.job(job_id)["health"] == "incomplete"


def test_a_queued_job_past_its_runs_deadline_never_starts(world):
    store, leases = world
    job_id = store.create_job("j", "t", "h", {**SPEC, "deadline_at": time.time() - 5})
    fresh = store.create_job("j", "t", "h", {**SPEC, "deadline_at": time.time() + 60})
    Reconciler(store, leases).pass_()
    job = store.job(job_id)
    assert (job["health"], job["cancel_requested"]) == ("timed_out", True)
    assert store.job(fresh)["state"] == "queued"


def test_settling_a_lost_job_is_one_transaction_that_only_one_caller_wins(world):
    """Readers polled the job between "done" and its steps being settled and saw a step still running: the verdict,
    the errored step and the skipped ones are written together, and only by the caller that finds it running."""
    store, _ = world
    job_id = running_elsewhere(store, 0, fence=7)
    seen = []

    from sqlalchemy import event

    def after_commit(conn):  # what a reader would see at each commit
        with store.engine.connect() as c:
            row = c.execute(store.jobs.select().where(store.jobs.c.id == job_id)).mappings().one()
            steps = c.execute(store.steps.select().where(store.steps.c.job_id == job_id)).mappings().all()
            seen.append((row["state"], sorted((s["idx"], s["status"]) for s in steps)))

    event.listen(store.engine, "commit", after_commit)
    try:
        planned = [{"name": "a", "command": "panio ping t"}, {"name": "b", "command": "panio x"}]
        assert store.finish_lost(job_id, "lost", {"exit": 4}, [{"got": "worker lost"}], planned)
        assert not store.finish_lost(job_id, "lost again", {"exit": 4}, [], planned)  # settled: nobody else
    finally:
        event.remove(store.engine, "commit", after_commit)
    assert seen and all(state != "done" or steps == [(0, "error"), (1, "skipped")] for state, steps in seen), seen
    assert store.job(job_id)["reason"] == "lost"


def test_a_long_lived_reconciler_forgets_the_jobs_it_suspected_once_they_start_or_end(world):
    """A queued job missing from the broker is a suspect until two looks apart; a job that starts or ends
    meanwhile is dropped, so a controller or scheduler running for weeks does not keep every job it saw."""
    from bench_agent.jobs.reconcile import BrokerView

    store, leases = world
    spec = {**SPEC, "via": "broker"}
    started, ended, still = (store.create_job("j", "t", "local", spec) for _ in range(3))
    rec = Reconciler(store, leases, resend=lambda payload: None, broker=BrokerView(REDIS_URL, leases.prefix))
    rec.pass_()  # none of them is in this prefix's (empty) queues: all three are suspects
    assert set(rec._suspects) == {started, ended, still}
    assert store.take(started, "worker local@here:1", 0) and store.claim(started, "worker local@here:1")
    assert store.finish(ended, "canceled", None, "canceled by request")
    rec.pass_([started])  # a pass over some jobs settles only those
    assert set(rec._suspects) == {ended, still}
    rec.pass_()
    assert set(rec._suspects) == {still}
    assert store.finish(still, "incomplete", None, "withdrawn", only_if_queued=True)
    rec.pass_()
    assert rec._suspects == {}


def test_a_lost_job_settled_after_a_later_job_started_on_its_target_leaves_the_health_alone(world):
    """The compressed night: a worker killed with -9, its job settled by the reconciler only after the target's
    next job had started (its lease expired first) and passed; marking the board unknown then would leave it
    unknown with no job left to check it. A lost job with nothing after it still makes the target unknown."""
    from bench_agent.health.state import HealthStore

    store, leases = world
    health = HealthStore(store.url)
    health.set("t", "good", "checked", "test")
    lost = running_elsewhere(store, dead_after_s(SPEC) + 1, fence=7)
    later = store.create_job("j", "t", "h", SPEC)
    assert store.take(later, "worker h@another-machine:4343", 0) and store.claim(later, "worker h@another-machine:4343")
    Reconciler(store, leases).pass_([lost])
    assert store.job(lost)["health"] == "incomplete"
    assert health.get("t")["health"] == "good"
    alone = running_elsewhere(store, dead_after_s(SPEC) + 1, fence=8)
    Reconciler(store, leases).pass_([alone])
    assert (health.get("t")["health"], health.get("t")["set_by"]) == ("unknown", "reconciler")


def test_a_runner_whose_lease_was_lost_and_that_ends_after_the_next_job_started_leaves_the_health_alone(world):
    """The same for the runner's own verdict: a job whose lease Redis lost (and another job took) ends incomplete
    after the target's next job passed its health gate; marking the board unknown then would leave it unknown
    with nothing to check it. A job ending incomplete with nothing after it still makes the target unknown."""
    from bench_agent.health.state import HealthStore
    from bench_agent.jobs.runner import JobRunner

    store, leases = world
    health = HealthStore(store.url)
    health.set("t", "good", "checked", "test")
    runner = JobRunner(store, leases, "worker h@this:1")
    lost = running_elsewhere(store, 0, fence=7)
    later = store.create_job("j", "t", "h", SPEC)
    assert store.take(later, "worker h@another-machine:4343", 0) and store.claim(later, "worker h@another-machine:4343")
    runner._finish({"job_id": lost, "name": "j", "target": "t", **SPEC}, "incomplete", None, "lease lost: token 7 ...")
    assert store.job(lost)["health"] == "incomplete" and health.get("t")["health"] == "good"
    assert store.finish(later, "complete", "passed", "all steps passed")
    alone = running_elsewhere(store, 0, fence=9)
    runner._finish({"job_id": alone, "name": "j", "target": "t", **SPEC}, "incomplete", None, "lease lost: token 9 ...")
    assert (health.get("t")["health"], health.get("t")["set_by"]) == ("unknown", "worker h@this:1")


def test_a_lost_job_with_nothing_after_it_has_its_target_rechecked_automatically(world):
    """A worker killed under the last job of the night: nothing comes to run the target's check before a job, so
    the unknown the reconciler records carries an automatic re-check (`panio schedule serve` runs it) after the
    check's retry_s; a target with no health check configured gets none."""
    from bench_agent.health import state as h

    store, leases = world
    health = h.HealthStore(store.url)
    job_id = store.create_job("j", "t", "h", {**SPEC, "health_check": {"name": "c", "steps": [], "retry_s": 20}})
    assert store.take(job_id, "worker h@another-machine:4242", 0) and store.claim(job_id, "worker h@another-machine:4242")
    with store.engine.begin() as c:
        c.execute(store.jobs.update().where(store.jobs.c.id == job_id).values(beat_at=time.time() - 60))
    before = time.time()
    Reconciler(store, leases).pass_([job_id])
    record = health.get("t")
    assert record["health"] == "unknown" and before + 19 <= record["recheck_at"] <= time.time() + 21, record
    assert not h.recheck_due(record, time.time()) and h.recheck_due(record, record["recheck_at"])
    why = h.check_due(record, {"retry_s": 20}, record["recheck_at"])
    assert why.startswith("it is unknown and its automatic re-check is due (job ")
    assert health.postpone("t", "its health check waits for the lab: the plug", record["recheck_at"] + 20)
    assert health.get("t")["health"] == "unknown"  # held for the lab: still unknown, asked again later
    bare = running_elsewhere(store, dead_after_s(SPEC) + 1, fence=9)  # no health check: nothing to run
    Reconciler(store, leases).pass_([bare])
    assert (health.get("t")["health"], health.get("t")["recheck_at"]) == ("unknown", None)
