"""The lease check's reads from memory (``bench_agent.leases.cache``), against the real Redis on loopback:
a check answered from memory must say what Redis would say, whoever changed the lease and however."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import redis

from bench_agent.leases import cache as lease_cache

from bench_agent.leases import redis_store as redis_leases
from jobhelp import wait_for
from peerhelp import REDIS, SHARED_REDIS, PrivateRedis


def checker(url: str, prefix: str) -> redis_leases.RedisLeaseStore:
    """A store whose lease checks come from memory: the first read of a process goes to Redis, the second
    sets up the tracking connection."""
    store = redis_leases.RedisLeaseStore(url, prefix)
    assert store.holder("pico") is None and store.holder("pico") is None
    assert store.cache.client_id is not None, "the second check set up no tracking connection"
    return store


def test_a_lease_taken_or_let_go_by_another_client_is_seen_by_the_very_next_check(prefix):
    store, other = checker(SHARED_REDIS, prefix), redis_leases.RedisLeaseStore(SHARED_REDIS, prefix)
    hits = store.cache.hits
    for _ in range(20):
        assert store.holder("pico") is None
    assert store.cache.hits - hits >= 19, "the checks of a free target went to Redis every time"
    lease = other.try_acquire("pico", {"holder": "ci@desk", "job": 7}, ttl_s=30)
    held = store.holder("pico")  # no wait: Redis queued the invalidation before the grant's reply
    assert held is not None and (held["token"], held["holder"], held["job"]) == (lease.token, "ci@desk", 7)
    assert held["secret"] == lease.secret  # a lease check compares the caller's credential with it
    assert store.holder("pico")["token"] == lease.token
    lease.release()
    assert store.holder("pico") is None


def test_a_break_a_new_grant_and_a_delete_by_hand_each_reach_the_next_check(prefix):
    store, other = checker(SHARED_REDIS, prefix), redis_leases.RedisLeaseStore(SHARED_REDIS, prefix)
    lease = other.try_acquire("pico", {"holder": "a"}, ttl_s=30)
    assert store.holder("pico")["token"] == lease.token
    other.break_("pico", "operator@desk")
    assert store.holder("pico") is None
    again = other.try_acquire("pico", {"holder": "b"}, ttl_s=30)
    assert store.holder("pico")["holder"] == "b"
    redis.Redis.from_url(SHARED_REDIS).delete(other._key("pico"))  # a write by hand, as a recovery script does
    assert store.holder("pico") is None
    assert again.token > lease.token


def test_a_lease_that_expires_unrenewed_is_not_held_past_its_ttl(tmp_path: Path, monkeypatch):
    """Redis expires a key nobody reads lazily, and sends its invalidation only then: with its active expiry
    off (and entries trusted for long), only the TTL the entry was read with ends it."""
    monkeypatch.setattr(lease_cache, "MAX_AGE_S", 60.0)
    conf = tmp_path / "redis.conf"
    conf.write_text("enable-debug-command local\n")
    server = PrivateRedis(tmp_path)
    _start_with_config(server, conf)
    try:
        redis.Redis.from_url(server.url).execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        store, other = checker(server.url, "p:"), redis_leases.RedisLeaseStore(server.url, "p:")
        lease = other.try_acquire("pico", {"holder": "crashed"}, ttl_s=0.6, durable_fence=False)
        assert store.holder("pico")["token"] == lease.token
        wait_for(lambda: store.holder("pico") is None, timeout_s=10, every_s=0.02)
        assert time.monotonic() - lease.taken_at < 10  # gone with its TTL (0.6 s), not a minute later
    finally:
        server.stop()


def test_a_lost_tracking_connection_drops_what_it_kept_true(prefix):
    """Killed by hand (or by Redis restarting): the write after it sends no invalidation to anyone, and
    the next check still sees it, from Redis."""
    store, other = checker(SHARED_REDIS, prefix), redis_leases.RedisLeaseStore(SHARED_REDIS, prefix)
    assert store.holder("pico") is None
    redis.Redis.from_url(SHARED_REDIS).client_kill_filter(_id=store.cache.client_id)
    lease = other.try_acquire("pico", {"holder": "a"}, ttl_s=30)
    assert store.holder("pico")["token"] == lease.token
    lease.release()
    wait_for(lambda: store.holder("pico") is None and store.cache.client_id is not None, timeout_s=10)


def test_a_redis_restart_that_loses_the_leases_is_seen_at_the_next_check(tmp_path: Path):
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        store, other = checker(server.url, "p:"), redis_leases.RedisLeaseStore(server.url, "p:")
        lease = other.try_acquire("pico", {"holder": "a"}, ttl_s=60, durable_fence=False)
        assert store.holder("pico")["token"] == lease.token
        server.restart(down_s=0.1)  # no persistence: the lease is gone
        assert store.holder("pico") is None
    finally:
        server.stop()


def test_a_redis_that_refuses_tracking_is_read_at_every_check(tmp_path: Path):
    conf = tmp_path / "redis.conf"
    conf.write_text('rename-command CLIENT ""\n')  # as a managed Redis with CLIENT left out of the ACL
    server = PrivateRedis(tmp_path)
    _start_with_config(server, conf)
    try:
        store, other = redis_leases.RedisLeaseStore(server.url, "p:"), redis_leases.RedisLeaseStore(server.url, "p:")
        for _ in range(5):
            assert store.holder("pico") is None
        lease = other.try_acquire("pico", {"holder": "a"}, ttl_s=60, durable_fence=False)
        assert store.holder("pico")["token"] == lease.token
        assert (store.cache.hits, store.cache.client_id) == (0, None)
    finally:
        server.stop()


def test_a_forked_child_does_not_read_its_parents_invalidations(prefix):
    """Parent and child would share one socket: whichever read an invalidation first would leave the other
    trusting a stale entry. The child sets up its own."""
    store, other = checker(SHARED_REDIS, prefix), redis_leases.RedisLeaseStore(SHARED_REDIS, prefix)
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits for the parent's grant, then checks
        try:
            os.read(go_r, 1)
            held = store.holder("pico")
            os.write(out_w, b"held" if held else b"free")
        finally:
            os._exit(0)
    try:
        lease = other.try_acquire("pico", {"holder": "a"}, ttl_s=30)
        assert store.holder("pico")["token"] == lease.token  # the parent read the invalidation off the socket
        os.write(go_w, b"x")
        assert os.read(out_r, 8) == b"held"
    finally:
        os.waitpid(pid, 0)
        for fd in (go_r, go_w, out_r, out_w):
            os.close(fd)


def _start_with_config(server: PrivateRedis, conf: Path) -> None:
    import subprocess

    from peerhelp import answers

    server.proc = subprocess.Popen([REDIS, str(conf), "--port", str(server.port), "--bind", "127.0.0.1",
                                    "--save", "", "--appendonly", "no", "--dir", str(server.root)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: answers(server.port), timeout_s=10, every_s=0.05)


@pytest.fixture(autouse=True)
def _no_results_database(monkeypatch, tmp_path):
    """Fences are claimed in the results database: a private SQLite file per test."""
    monkeypatch.setenv("PANIO_RESULTS_URL", f"sqlite:///{tmp_path / 'results.db'}")
