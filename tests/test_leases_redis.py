"""Leases in the real Redis on loopback, each test under its own random key prefix."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench_agent.errors import Busy, Refused
from bench_agent.jobs import leases
from conftest import PANIO
from jobhelp import fixture_lab, job_file, stop, wait_for
from peerhelp import SHARED_REDIS as REDIS_URL


@pytest.fixture
def store(prefix):
    return leases.RedisLeaseStore(REDIS_URL, prefix)


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


HOLDER = """
import sys, time
from bench_agent.jobs import leases
s = leases.RedisLeaseStore(sys.argv[1], sys.argv[2])
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
