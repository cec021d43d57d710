"""Leases in the real Redis on loopback, each test under its own random key prefix."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench_agent.errors import Busy, Refused
from bench_agent.leases import base as leases
from bench_agent.leases import redis_store as redis_leases
from conftest import PANIO
from jobhelp import fixture_lab, job_file, stop, wait_for
from peerhelp import SHARED_REDIS as REDIS_URL


@pytest.fixture
def store(prefix):
    return redis_leases.RedisLeaseStore(REDIS_URL, prefix)


def test_lease_is_exclusive_and_tokens_only_grow(store):
    a = store.try_acquire("pico", {"holder": "a"}, ttl_s=5)
    assert a is not None and store.try_acquire("pico", {"holder": "b"}, ttl_s=5) is None
    with pytest.raises(Busy, match="leased by a"):
        leases.acquire(store, "pico", {"holder": "b"}, ttl_s=5, wait_s=0.2)
    a.release()
    b = leases.acquire(store, "pico", {"holder": "b"}, ttl_s=5, wait_s=0.2)
    assert b.token > a.token
    with pytest.raises(Refused):
        store.check("pico", a.token)  # the old holder's fence no longer matches
    b.check()
    b.release()


def test_kept_lease_outlives_its_ttl_and_a_broken_one_fences_the_holder(store):
    lease = store.try_acquire("pico", {"holder": "a", "job": 3}, ttl_s=0.6)
    lease.keep(0.6)
    time.sleep(1.5)
    lease.check()
    record = store.break_("pico", "operator@desk")
    assert record["was"]["job"] == 3 and store.breaks()[0]["broken_by"] == "operator@desk"
    with pytest.raises(Refused, match="no longer held"):
        lease.check()
    lease.release()



def test_a_lease_kept_after_most_of_its_ttl_is_renewed_at_once_not_a_third_of_a_ttl_later(store):
    """A runner keeps its lease after the job's claim in the results database, and on a starved machine that
    claim took most of a 30 s TTL (docs/scale.md): the first renewal counts from when the key was set."""
    lease = store.try_acquire("pico", {"holder": "a"}, ttl_s=6.0)
    token = lease.token
    wait_for(lambda: time.monotonic() - lease.taken_at > 4.4, timeout_s=10)  # the claim: 4.4 s of the 6
    lease.keep(6.0)  # a third of the TTL from here would be 6.4 s after the key was set: 0.4 s too late
    wait_for(lambda: time.monotonic() - lease.taken_at > 8.0, timeout_s=15)
    lease.check()
    assert (lease.token, lease.lost) == (token, False)  # renewed in time, not expired and retaken
    lease.release()

HOLDER = """
import sys, time
from bench_agent.leases import redis_store as redis_leases
s = redis_leases.RedisLeaseStore(sys.argv[1], sys.argv[2])
lease = s.try_acquire("pico", {"holder": "doomed"}, ttl_s=1.0)
lease.keep(1.0)
print("held", flush=True)
time.sleep(60)
"""


def test_a_crashed_holders_lease_frees_within_its_ttl(store, prefix):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, REDIS_URL, prefix], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        time.sleep(1.5)  # longer than the TTL: the keeper renews it
        assert store.current("pico")["holder"] == "doomed"
        proc.kill()
        proc.wait(timeout=30)
        left = store.current("pico")  # Redis's own clock: no renewal now, so it forgets the lease within the TTL
        assert left is None or (left["ttl_left_s"] is not None and left["ttl_left_s"] <= 1.0), left
        wait_for(lambda: store.current("pico") is None, timeout_s=30, every_s=0.02)
    finally:
        stop(proc)
    assert store.try_acquire("pico", {"holder": "next"}, ttl_s=1) is not None


def test_breaking_a_running_jobs_lease_makes_it_incomplete(panio, tmp_path, prefix):
    panio.env.update(PANIO_REDIS_URL=REDIS_URL, PANIO_REDIS_PREFIX=prefix)
    fixture_lab(panio)
    panio("power", "set", "-t", "pico", "--off-cmd", "true")
    body = "target = 'pico'\nlease_ttl_s = 5\n[[steps]]\nrun = 'ping ${target} --count 300 --interval 0.1'\n" \
           "[[steps]]\nrun = 'ping ${target}'\n"
    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, body)], env=panio.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        held = wait_for(lambda: panio("lease", "list", "--json").json(), 60)
        assert held[0]["job"] == 1 and 0 < held[0]["ttl_left_s"] <= 5
        panio.fails("power", "off", "pico", code=8)  # a side effect: refused
        panio("ping", "pico")  # a read: served while leased
        assert "broke the lease on pico" in panio("lease", "break", "pico").out
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 13, err
    finally:
        stop(proc)
    job = panio("job", "status", "1", "--json").json()
    assert job["health"] == "incomplete" and "lease lost" in job["reason"]
    assert [s["status"] for s in job["steps"]] == ["error", "skipped"]
    assert panio("lease", "list", "--breaks", "--json").json()[0]["target"] == "pico"
    panio.fails("lease", "break", "pico", code=10)


def test_an_operators_override_acts_under_whichever_lease_holds_the_target_when_it_reaches_the_host(
        store, prefix, tmp_path, monkeypatch):
    """Issue 27: the override's grant is read by the host as it acts, so a lease that changed hands meanwhile
    (back-to-back jobs) is overridden all the same, and the grant names the job whose lease it was."""
    from bench_agent.leases import guard as lease_guard
    from bench_agent.leases import override as lease_override

    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PANIO_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("PANIO_REDIS_PREFIX", prefix)
    first = store.try_acquire("pico", {"holder": "worker a", "job": 1}, ttl_s=30)
    nonce = lease_override.grant(store, "pico", "serial.stop", "ops@desk", "capture wedged")
    first.release()  # job 1 ends before the command reaches the host; job 2 leases the target
    second = store.try_acquire("pico", {"holder": "worker b", "job": 2}, ttl_s=30)
    with pytest.raises(Busy, match="job 2"):
        lease_guard.enforce("serial.stop", {"target": "pico"}, None)  # without the grant: refused, as ever
    for op, target in (("serial.send", "pico"), ("serial.stop", "other")):  # only the granted command and target
        with pytest.raises(Refused, match="override of .* was not honoured"):
            lease_guard.enforce(op, {"target": target}, None, override=nonce)
    lease_guard.enforce("serial.stop", {"target": "pico"}, None, override=nonce)
    with pytest.raises(Refused, match="not honoured") as used_up:  # once only
        lease_guard.enforce("serial.stop", {"target": "pico"}, None, override=nonce)
    assert used_up.value.exit_status == 13
    assert lease_override.used(store, nonce) == [{"holder": "worker b", "job": 2, "token": second.token}]
    assert lease_override.used(store, nonce) is None  # the grant is gone once read back
    with pytest.raises(Refused, match="not honoured"):
        lease_guard.enforce("serial.stop", {"target": "pico"}, None, override="made-up")
    second.check()  # the job's own lease is untouched: its next console step finds the capture stopped
    second.release()


def _forget_everything(prefix):
    """What a Redis restarted without persistence does to the lease store: every key gone, counters included."""
    import redis

    r = redis.Redis.from_url(REDIS_URL)
    for key in r.scan_iter(match=f"{prefix}*"):
        r.delete(key)


def test_a_lease_redis_forgot_is_retaken_by_its_holder_only_while_nobody_else_had_the_target(store, prefix):
    """Issue 27: a Redis restart without persistence ends no running job whose target nobody took meanwhile: the
    holder retakes its lease under a new token above the durable high-water mark and goes on; the host takes
    only the new credential. Anyone granted the target in between, an operator's break, or a lease that merely
    expired (Redis kept its data) still fences it."""
    lease = store.try_acquire("pico", {"holder": "worker a", "job": 1}, ttl_s=30)
    told = []
    lease.on_retake = lambda: told.append(lease.token)
    lease.keep(30)
    old, presented = lease.token, leases.Presented(lease)
    _forget_everything(prefix)
    lease.check()  # the key is gone, nobody had the target: retaken
    assert lease.token > old and told == [lease.token] and not lease.lost
    assert store.fences.high("pico") == lease.token and store.current("pico")["job"] == 1
    leases.check_access(store, "pico", str(presented))  # the holder presents its new credential
    with pytest.raises(Busy):
        leases.check_access(store, "pico", leases.credential(old, "stale"))

    _forget_everything(prefix)  # lost again, and this time another holder is granted the target first
    other = store.try_acquire("pico", {"holder": "worker b", "job": 2}, ttl_s=30)
    other.release()
    with pytest.raises(Refused):
        lease.check()  # the high-water mark moved on: the job's lease is lost for good
    assert lease.lost
    lease.release()

    broken = store.try_acquire("pico", {"holder": "worker c", "job": 3}, ttl_s=30)
    broken.keep(30)
    store.break_("pico", "ops@desk")
    with pytest.raises(Refused):
        broken.check()  # an operator's break is never undone by its holder (Redis kept the token counter)
    broken.release()
    stalled = store.try_acquire("pico", {"holder": "worker d", "job": 4}, ttl_s=30)
    stalled.keep(30)
    store.r.delete(store._key("pico"))  # expired unrenewed (a holder that stalled past its TTL): no data loss
    with pytest.raises(Refused):
        stalled.check()
    stalled.release()


def test_a_store_recorded_or_forgotten_between_two_checks_counts_at_the_next_one(store, prefix, tmp_path,
                                                                                 monkeypatch):
    """The host keeps its list of lease stores between side effects (one ``stat`` a check, not a read of
    lease-stores.json); recording a store (`panio lease store --set`, a worker starting) or forgetting one
    still counts at the very next check, in the same process."""
    from bench_agent.leases import guard as lease_guard

    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("PANIO_REDIS_URL", raising=False)
    monkeypatch.delenv("PANIO_BROKER", raising=False)
    held = store.try_acquire("pico", {"holder": "worker a", "job": 1}, ttl_s=30)
    lease_guard.enforce("serial.send", {"target": "pico"}, None)  # no store known: the file leases alone
    lease_guard.remember(REDIS_URL, prefix, "test")
    with pytest.raises(Busy, match="worker a"):
        lease_guard.enforce("serial.send", {"target": "pico"}, None)
    assert lease_guard.forget(REDIS_URL)
    lease_guard.enforce("serial.send", {"target": "pico"}, None)
    held.release()
