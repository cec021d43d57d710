"""Jobs a reconciler sends again after their worker was killed, or after Redis lost their message, are recorded
with the job and shown on its dashboard page (issue 44 item 5); so is a send it refused. Real Redis, SQLite."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from bench_agent.errors import Refused
from bench_agent.jobs.reconcile import Reconciler, dead_after_s
from bench_agent.leases.redis_store import RedisLeaseStore
from bench_agent.results.store import ResultStore
from dashhelp import Client, DashboardProc

REDIS_URL = "redis://127.0.0.1:6379/5"
SPEC = {"lease_ttl_s": 2, "via": "broker", "steps": [{"name": "a", "command": "panio ping t"}]}


@pytest.fixture
def leases():
    store = RedisLeaseStore(REDIS_URL, f"resent-{uuid.uuid4().hex[:8]}:")
    yield store
    for key in store.r.scan_iter(match=f"{store.prefix}*"):
        store.r.delete(key)


def taken_by_a_dead_worker(store) -> int:
    """A job a worker on another machine took, and then went silent before it started (killed)."""
    job_id = store.create_job("j", "t", "h", SPEC)
    assert store.take(job_id, "worker h@another-machine:4242", 0)
    with store.engine.begin() as c:
        c.execute(store.jobs.update().where(store.jobs.c.id == job_id).values(beat_at=time.time() - 60))
    return job_id


def test_a_job_sent_again_is_recorded_and_shown_on_its_page(panio, leases, tmp_path):
    panio("init")
    Path(panio.env["PANIO_STATE_DIR"]).mkdir(parents=True, exist_ok=True)
    store = ResultStore(f"sqlite:///{panio.env['PANIO_STATE_DIR']}/results.db")
    sent, refused = taken_by_a_dead_worker(store), taken_by_a_dead_worker(store)
    assert dead_after_s(SPEC) < 60

    def resend(job: dict) -> None:
        if job["id"] == refused:
            raise Refused("no message sealed by this controller is kept for it")

    Reconciler(store, leases, resend=resend).pass_()
    events = store.events(sent)
    assert [e["event"] for e in events] == ["resent"] and "died before it started" in events[0]["text"]
    assert [e["event"] for e in store.events(refused)] == ["not_resent"]
    dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
    try:
        page = Client(dashboard.url).get(f"/jobs/{sent}")[2]
        table = page.split('id="job-events"')[1].split("</table>")[0]
        assert "sent again" in table and "worker h@another-machine:4242 died before it started" in table
        page = Client(dashboard.url).get(f"/jobs/{refused}")[2]
        assert "not sent again" in page and "no message sealed by this controller" in page
    finally:
        dashboard.stop()
    assert store.prune(time.time() + 1, dry_run=False)["jobs"] >= 1 and store.events(refused) == []
