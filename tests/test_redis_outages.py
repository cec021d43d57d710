"""Issue 43: Redis away (a private redis-server stopped and started again, its data kept with AOF) as a job's
lease, a health check, the scheduler and the dashboard see it."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

import pytest

from jobhelp import wait_for
from peerhelp import REDIS, PrivateRedis

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed (scripts/system-deps.sh)")


@pytest.fixture
def aof_redis(tmp_path):
    redis = PrivateRedis(tmp_path, aof=True)
    redis.start()
    yield redis
    redis.stop()


def _in_thread(func) -> tuple[threading.Thread, dict]:
    """``func()`` in a thread of its own; what it returned (``value``) or raised (``error``), and when (``at``)."""
    got: dict = {}

    def run() -> None:
        try:
            got["value"] = func()
        except Exception as exc:  # noqa: BLE001 - handed to the test, which asserts on it
            got["error"] = exc
        got["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_a_steps_lease_check_waits_for_redis_for_as_long_as_the_lease_may_hold(aof_redis, tmp_path, monkeypatch,
                                                                               caplog):
    """A job's side effect whose lease the host cannot check because Redis is away waits for Redis (one line when
    it goes, one when it is back) and is then done, once; before, it failed after 3 s and the job ended
    incomplete. It waits only as long as the lease's TTL (from its last renewal) may still hold it, then the lease
    is lost; a broken lease is refused at once."""
    from bench_agent.jobs.runner import local_caller
    from bench_agent.leases import base as leases
    from bench_agent.leases.fences import FenceStore
    from bench_agent.leases.redis_store import RETRY_S, RedisLeaseStore

    prefix, results = f"t{uuid.uuid4().hex[:8]}:", f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PANIO_REDIS_URL", aof_redis.url)  # the store the host's lease guard checks
    monkeypatch.setenv("PANIO_REDIS_PREFIX", prefix)
    store = RedisLeaseStore(aof_redis.url, prefix, fences=FenceStore(results))
    marks = tmp_path / "marks"
    mark = {"target": "t1", "name": "mark", "command": f"sh -c 'echo x >> {marks}'"}
    caplog.set_level(logging.WARNING, logger="panio.worker")

    def step(ttl_s: float):
        lease = leases.acquire(store, "t1", {"holder": "test"}, ttl_s=ttl_s, wait_s=5)
        lease.keep(ttl_s)
        call = local_caller("t1", leases.Presented(lease), store)
        assert call("action.run", mark)["exit"] == 0
        return lease, call

    lease, call = step(ttl_s=15.0)  # renewed every 5 s: the store holds it at least 10 s after Redis goes
    aof_redis.stop()
    thread, got = _in_thread(lambda: call("action.run", mark))
    # the guard's check gave up on Redis (after RETRY_S: the old code's failure) and the call waits for it
    wait_for(lambda: not thread.is_alive() or "lease store: Redis unreachable since" in caplog.text, timeout_s=30)
    assert thread.is_alive(), got
    aof_redis.start()
    thread.join(timeout=30)
    assert "error" not in got, got.get("error")
    assert got["value"]["exit"] == 0 and marks.read_text() == "x\nx\n"  # done once, after Redis came back
    said = [r.getMessage() for r in caplog.records]
    assert sum("lease store: Redis unreachable since" in m for m in said) == 1, said
    assert sum("lease store: Redis back after" in m for m in said) == 1, said
    assert not lease.lost

    store.break_("t1", "operator@desk")  # broken: refused at once, nothing done
    started = time.monotonic()
    with pytest.raises(leases.Refused, match="lease lost"):
        call("action.run", mark)
    assert time.monotonic() - started < RETRY_S and marks.read_text() == "x\nx\n"
    lease.release()

    lease, call = step(ttl_s=5.0)  # Redis away for longer than the lease may hold: lost once its TTL ran out
    aof_redis.stop()
    may_hold_s = lease.held_for_s()
    started = time.monotonic()
    with pytest.raises(leases.Refused, match="lost: its store stayed out of reach") as lost:
        call("action.run", mark)
    waited_s = time.monotonic() - started
    # a guard's check of a request naming no lab reads two keys, each tried for RETRY_S: the last try's overrun
    assert may_hold_s - 0.5 <= waited_s <= may_hold_s + 2 * RETRY_S + 1.5, (may_hold_s, waited_s, lost.value)
    assert lease.lost and marks.read_text() == "x\nx\nx\n"
    assert any("the lease on 't1'" in r.getMessage() and "is lost" in r.getMessage() for r in caplog.records)
    aof_redis.start()
    assert store.current("t1") is None  # Redis kept the lease's TTL: it had expired, as the runner said
    with pytest.raises(leases.Refused):
        lease.check()
