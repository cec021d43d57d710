"""No broker user runs Lua of its own, and no broker item is bigger than panio writes (docs/security.md, "The broker").

A real redis-server with the redis role's rendered ACL and settings (``brokerhelp.LockedRedis``): a host's user is
refused EVAL, EVALSHA, SCRIPT LOAD and FUNCTION LOAD, the broker stays responsive, and leases, override grants and
kombu's binding expiry work through FCALL of panio's function library; an empty Redis gets the library on first
use; a user that may not load it gets panio's clear error. ``proto-max-bulk-len`` refuses an item over the cap,
while a host's maximal report goes through.
"""

from __future__ import annotations

import subprocess
import time

import pytest
import redis

from bench_agent import redis_functions
from bench_agent.errors import NotConfigured
from bench_agent.leases.fences import FenceStore
from bench_agent.leases.redis_store import RedisLeaseStore
from brokerhelp import HOSTS, PASSWORDS, LockedRedis
from jobhelp import wait_for
from peerhelp import REDIS, free_port

HOST = "hx"
HOST_PASSWORD = HOSTS[HOST]["password"]


@pytest.fixture
def broker(tmp_path):
    locked = LockedRedis(tmp_path / "redis", panio_redis_hosts=HOSTS)
    yield locked
    locked.stop()


@pytest.fixture
def bare(tmp_path):
    """A locked Redis that lacks panio's functions (a Redis that lost its data, or an upgrade not set up yet)."""
    locked = LockedRedis(tmp_path / "bare", functions=False, panio_redis_hosts=HOSTS)
    yield locked
    locked.stop()


def leases(url: str, tmp_path) -> RedisLeaseStore:
    return RedisLeaseStore(url, "panio:", fences=FenceStore(f"sqlite:///{tmp_path / 'fences.db'}"))


def test_a_host_user_may_run_no_lua_of_its_own_and_the_broker_stays_responsive(broker):
    for user, password in (("panio-host-hx", HOST_PASSWORD), ("panio-worker", PASSWORDS["panio_redis_worker_password"])):
        r = broker.client(user, password, socket_timeout=5)
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.eval("while true do end", 0)
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.script_load("while true do end")
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.evalsha("0" * 40, 0)
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.function_load("#!lua name=evil\nredis.register_function('evil', function() while true do end end)",
                            replace=True)
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.function_flush()
        started = time.monotonic()
        assert r.ping() and time.monotonic() - started < 1  # nothing blocks the broker
        r.close()


def test_leases_and_override_grants_work_for_a_host_user_through_fcall(broker, tmp_path):
    from bench_agent.leases import override

    store = leases(broker.url("panio-host-hx", HOST_PASSWORD), tmp_path)
    lease = store.try_acquire("t1", {"holder": "me"}, ttl_s=30)
    assert lease is not None and lease.token >= 1
    assert store.try_acquire("t1", {"holder": "other"}, ttl_s=30) is None
    assert store.renew("t1", lease.token, 30, lease.owner)
    store.release("t1", lease.token, lease.owner)
    assert store.current("t1") is None
    with pytest.raises(redis.exceptions.NoPermissionError):  # its own targets only, FCALL or not
        redis_functions.fcall(store.r, "acquire", ["panio:lease:t9", "panio:fence:t9"], ["{}", 1000, 0, 0, "o", "s"])
    controller = leases(broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]), tmp_path)
    nonce = override.grant(controller, "t1", "serial.stop", "me", "test")
    assert override.take(store, nonce, "t1", "serial.stop", [])
    assert not override.take(store, nonce, "t1", "serial.stop", [])  # once


def test_an_empty_redis_gets_the_library_on_first_use(tmp_path):
    port = free_port()
    proc = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port, decode_responses=True)
        wait_for(lambda: _pings(r), timeout_s=10)
        assert r.function_list() == []
        store = leases(f"redis://127.0.0.1:{port}/0", tmp_path)
        lease = store.try_acquire("t1", {"holder": "me"}, ttl_s=30)
        assert lease is not None
        assert r.fcall_ro(f"{redis_functions.LIBRARY_NAME}_present", 0) == 1
        r.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_user_that_may_not_load_the_library_gets_panios_clear_error(bare, tmp_path):
    store = leases(bare.url("panio-host-hx", HOST_PASSWORD), tmp_path)
    with pytest.raises(NotConfigured) as caught:
        store.try_acquire("t1", {"holder": "me"}, ttl_s=30)
    err = caught.value
    assert err.exit_status == 3 and "panio-host-hx" in err.message and "panio setup" in err.hint
    assert err.to_json()["error"] == "not_configured"
    # the controller's user loads it on its first use; then the host's leases work
    controller = leases(bare.url("panio-controller", PASSWORDS["panio_redis_controller_password"]), tmp_path)
    assert controller.try_acquire("t2", {"holder": "me"}, ttl_s=30) is not None
    assert store.try_acquire("t1", {"holder": "me"}, ttl_s=30) is not None


def test_a_worker_whose_user_may_not_load_the_library_says_so_in_one_line_and_exits_3(panio, bare, tmp_path):
    """Before Celery starts (its consumer stopped on the first FCALL with a traceback, and the worker exited 0,
    which a unit's Restart=on-failure takes for a clean stop): panio's one line, exit 3; once the library is
    there the same worker starts."""
    import os

    from conftest import PANIO
    from peerhelp import Workers, worker_lab

    workers = Workers(tmp_path, bare.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                      worker_broker=bare.url("panio-host-hx", HOST_PASSWORD), PANIO_REDIS_PREFIX="panio:",
                      PANIO_BROKER_PER_HOST="1")
    try:
        worker_lab(panio, workers, host=HOST)
        env = {**os.environ, **workers.env, **workers.worker_env, "PANIO_STATE_DIR": str(tmp_path / "wstate"),
               "HOME": str(tmp_path)}
        done = subprocess.run([PANIO, "worker", "--host", HOST, "--lab", str(workers.lab)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 3, done.stderr[-2000:]
        human, machine = done.stderr.strip().splitlines()
        assert "panio-host-hx may not use or load panio's Redis functions" in human and "Traceback" not in done.stdout
        assert '"error": "not_configured"' in machine
        bare.load_functions()  # as `panio setup --broker-admin` does
        assert workers.start(HOST).poll() is None
    finally:
        workers.stop_all()


def test_kombus_lua_runs_as_panio_functions(bare):
    """Celery's remote-control queues expire: kombu refreshes their bindings with Lua, and releases the mutex of
    its restore of unacknowledged messages with Lua; here by FCALL."""
    from kombu import Connection, Exchange, Queue

    from bench_agent.jobs.kombu_redis import PATH

    url = bare.url("panio-worker", PASSWORDS["panio_redis_worker_password"])
    prefix = "panio:celery:"
    with Connection(url, transport=PATH, transport_options={"global_keyprefix": prefix}) as conn:
        channel = conn.channel()
        exchange = Exchange("celery.pidbox", type="fanout", channel=channel)
        queue = Queue("w1.celery.pidbox", exchange, expires=10.0, channel=channel)
        with pytest.raises(redis.exceptions.ResponseError, match="may not use or load"):
            queue.declare()  # the worker's user may not load the library: a Redis error kombu logs
        bare.load_functions()
        channel = conn.channel()  # the failed bind stays in the first channel's state
        Queue("w2.celery.pidbox", exchange, expires=10.0, channel=channel).declare()
        r = bare.client("panio-controller", PASSWORDS["panio_redis_controller_password"], decode_responses=True)
        assert r.zscore(f"{prefix}_kombu.binding_deadlines", "celery.pidbox")  # refreshed by the function
        r.delete(f"{prefix}_kombu.binding.celery.pidbox")
        channel._refresh_bindings(["w2.celery.pidbox"])  # the consumer's periodic refresh: FCALLs in a pipeline
        assert r.smembers(f"{prefix}_kombu.binding.celery.pidbox")
        r.zadd(f"{prefix}_kombu.binding_deadlines", {"gone": 1})
        assert channel.sweep_bindings() == 1 and r.zscore(f"{prefix}_kombu.binding_deadlines", "gone") is None
        # kombu's mutex around its restore of unacknowledged messages: taken by SET NX, released by FCALL
        channel.qos.restore_visible()
        assert r.get(f"{prefix}unacked_mutex") is None
        r.set(f"{prefix}unacked_mutex", "someone else's", px=60_000)
        lock = channel.client.lock("unacked_mutex", timeout=60)
        lock.local.token = b"mine"
        with pytest.raises(redis.exceptions.LockNotOwnedError):
            lock.release()
        assert r.get(f"{prefix}unacked_mutex") == "someone else's"
        r.close()


def test_an_item_over_the_cap_is_refused_and_a_maximal_report_goes_through(broker):
    from bench_agent.results import reports

    r = broker.client("panio-host-hx", HOST_PASSWORD, socket_timeout=30)
    out = "\U0001F600" * 1_000_000  # a step's whole output, each character JSON's worst escape
    step = {"name": "s", "command": "x", "status": "pass", "output": out, "checks": [], "captured": {}}
    body = reports.body(HOST, 1, 1, "finish", 1, {"steps": [[0, step]], "artifacts": []})
    assert len(body) > 12_000_000
    r.xadd(f"panio:reports:{HOST}", {"body": body, "sig": "x"})
    assert r.xlen(f"panio:reports:{HOST}") == 1
    with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.ResponseError)):
        r.lpush(f"panio:h.{HOST}:celery:celery", b"x" * (64 * 1024 * 1024 + 1))
    r = broker.client("panio-host-hx", HOST_PASSWORD, socket_timeout=30)
    assert r.llen(f"panio:h.{HOST}:celery:celery") == 0 and r.ping()
    r.close()


def _pings(r) -> bool:
    try:
        return r.ping()
    except redis.exceptions.ConnectionError:
        return False


def test_the_roles_copy_of_the_library_is_panios():
    """ansible/roles/redis loads files/NAME.lua (it cannot import panio): the same text as the code's."""
    from brokerhelp import ROLE, render

    assert (ROLE / "files" / f"{redis_functions.LIBRARY_NAME}.lua").read_text() == redis_functions.LIBRARY
    assert "panio_redis_functions_library: " + redis_functions.LIBRARY_NAME in (ROLE / "defaults" / "main.yml").read_text()
    acl = render("panio-users.acl.j2", {**PASSWORDS, "panio_redis_admin_password": "admin-secret-0123456789"})
    assert "+eval" not in acl and "+script" not in acl and acl.count("+function|load") == 2  # controller, admin


def test_setups_admin_user_loads_the_library(tmp_path):
    """`panio setup --broker-admin` (controller.provision.broker_users.load_functions) as the role's panio-admin."""
    from controller.provision import broker_users

    admin = "admin-secret-0123456789"
    locked = LockedRedis(tmp_path / "redis", functions=False, panio_redis_hosts=HOSTS, panio_redis_admin_password=admin)
    try:
        broker_users.load_functions(locked.url("panio-admin", admin), HOST)
        store = leases(locked.url("panio-host-hx", HOST_PASSWORD), tmp_path)
        assert store.try_acquire("t1", {"holder": "me"}, ttl_s=30) is not None
        with pytest.raises(NotConfigured, match="could not load panio's Redis functions"):
            broker_users.load_functions(locked.url("panio-host-hx", HOST_PASSWORD), HOST)  # not an admin
    finally:
        locked.stop()
