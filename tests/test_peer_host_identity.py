"""Issue 38, item 2: one broker identity per control host, against a real redis-server with the role's ACL.

The server runs ansible/roles/redis's configuration (rendered as in ``test_peer_broker_lockdown``) with two
control hosts, ``ha`` (target ``ta``) and ``hb`` (target ``tb``), each with its own Redis user
(``panio-host-NAME``); the controller and the workers keep each host's Celery keys under a prefix of its own
(``PANIO_BROKER_PER_HOST=1``). A real ``panio worker`` of ``ha``, connected as ``panio-host-ha``, runs a job the
controller queued and takes its target's lease, and answers an operation; ``ha``'s credentials cannot take, read or
delete what waits in ``hb``'s queue, read or write ``hb``'s targets' leases, nor append to ``hb``'s reports stream.
"""

from __future__ import annotations

import json
import os

import pytest

from jobhelp import job_file
from peerhelp import REDIS, Workers, use_lab
from test_peer_broker_lockdown import PASSWORDS, QUICK, LockedRedis

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed")
HOSTS = {"ha": {"password": "host-a-secret-0123456789", "targets": ["ta"]},
         "hb": {"password": "host-b-secret-0123456789", "targets": ["tb"]}}
# the user whose credentials host ha's worker holds; the shared "panio-worker" here makes every refusal below fail
HOST_A = ("panio-host-ha", HOSTS["ha"]["password"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    redis = LockedRedis(tmp_path_factory.mktemp("hosts"), panio_redis_hosts=HOSTS)
    yield redis
    redis.stop()


@pytest.fixture(scope="module")
def lab(broker, tmp_path_factory):
    """A lab of two hosts; ha's worker runs as ha's own user, hb has none (what waits for it stays queued)."""
    root = tmp_path_factory.mktemp("identity")
    workers = Workers(root, broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                      worker_broker=broker.url(*HOST_A), PANIO_REDIS_PREFIX="panio:", PANIO_BROKER_PER_HOST="1")
    yield workers
    workers.stop_all()


def controller_client(broker):
    import redis

    return redis.Redis.from_url(broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                                decode_responses=True)


def test_a_host_runs_its_own_job_and_cannot_touch_another_hosts_queue_leases_or_reports(panio, broker, lab,
                                                                                        tmp_path, monkeypatch):
    import redis

    from bench_agent.leases.redis_store import RedisLeaseStore

    use_lab(panio, lab)
    for host, target in (("ha", "ta"), ("hb", "tb")):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
        panio("target", "add", target, "--host", host)
    panio("action", "add", "hi", "-t", "ta", "--command", f"touch {tmp_path / 'hi'}")
    worker = lab.start("ha")

    # hb's job waits in hb's queue (hb has no worker); hb's target is leased, hb has reported
    queued = panio("job", "submit", job_file(tmp_path, QUICK), "--target", "tb", "--json").json()
    ctl = controller_client(broker)
    hb_queue = "panio:h.hb:celery:host.hb"
    assert ctl.llen(hb_queue) == 1, sorted(ctl.scan_iter(match="panio:*"))
    monkeypatch.setenv("PANIO_RESULTS_URL", lab.env["PANIO_RESULTS_URL"])
    controller = RedisLeaseStore(broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]))
    hb_lease = controller.try_acquire("tb", {"holder": "hb's job"}, ttl_s=60, durable_fence=False)
    ctl.xadd("panio:reports:hb", {"body": "{}", "sig": ""})

    # ha's own worker, as ha's own user: it takes ha's job from ha's queue, leases ta, runs it
    r = panio("job", "run", job_file(tmp_path, QUICK), "--target", "ta")
    assert "complete, passed" in r.out and (tmp_path / "hi").exists()
    panio("host", "set", "ha", "--transport", "celery")  # an operation and its reply, through ha's own keys
    assert panio("ping", "ta", "--count", "2", "--json").json()["host"] == "ha"
    log = worker.log.read_text()
    assert "NOPERM" not in log and "NoPermission" not in log, log[-3000:]

    # ... and cannot take, read or drop what waits for hb, nor its unacknowledged messages, nor its replies
    a = redis.Redis.from_url(broker.url(*HOST_A), decode_responses=True)
    refused = [lambda: a.brpop([hb_queue], timeout=1), lambda: a.lpop(hb_queue), lambda: a.rpop(hb_queue),
               lambda: a.lrange(hb_queue, 0, -1), lambda: a.delete(hb_queue), lambda: a.llen(hb_queue),
               lambda: a.lmove(hb_queue, "panio:h.ha:celery:host.ha"),
               lambda: a.hgetall("panio:h.hb:celery:unacked"), lambda: a.lpush(hb_queue, "x"),
               lambda: a.get("panio:h.hb:celery:celery-task-meta-1"),
               lambda: a.publish("panio:h.hb:celery:/0.celery.pidbox", "x"),
               # the lab-wide layout of before is no one's to read either
               lambda: a.lrange("panio:celery:host.hb", 0, -1), lambda: a.hgetall("panio:celery:unacked"),
               # hb's target's lease, its fencing counter, a lab's lease on it
               lambda: a.hgetall("panio:lease:tb"), lambda: a.delete("panio:lease:tb"),
               lambda: a.hset("panio:lease:tb", "token", "1"), lambda: a.incr("panio:fence:tb"),
               lambda: a.hgetall("panio:lab:somelab:lease:tb"),
               # hb's reports
               lambda: a.xadd("panio:reports:hb", {"body": "{}", "sig": ""}),
               lambda: a.xrange("panio:reports:hb"), lambda: a.xtrim("panio:reports:hb", 0),
               # other commands stay refused
               lambda: a.execute_command("FUNCTION", "FLUSH"), lambda: a.keys("*"), lambda: a.config_get("*")]
    for i, call in enumerate(refused):
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
            pytest.fail(f"refused[{i}] was allowed")
    with pytest.raises(redis.exceptions.ResponseError, match="permissions"):  # a script is checked as its caller
        a.eval("return redis.call('hgetall', KEYS[1])", 1, "panio:lease:tb")
    replies = a.pubsub()
    replies.subscribe("panio:h.hb:celery:celery-task-meta-1")  # an operation's reply to hb's caller
    with pytest.raises(redis.exceptions.NoPermissionError):
        replies.get_message(timeout=5)
    replies.close()
    with pytest.raises(Exception, match="(?i)permission"):  # ha's lease store on hb's target: refused, not free
        RedisLeaseStore(broker.url(*HOST_A)).holder("tb")
    assert ctl.llen(hb_queue) == 1 and ctl.hgetall("panio:lease:tb")["token"] == str(hb_lease.token)
    assert ctl.xlen("panio:reports:hb") == 1
    assert json.loads(ctl.lindex(hb_queue, 0))["headers"]["id"] == f"panio-job-{queued['job_id']}"

    # what is its own works: its reports stream, its target's lease (read from memory, kept true by Redis)
    assert a.xadd("panio:reports:ha", {"body": "{}", "sig": ""})
    own = RedisLeaseStore(broker.url(*HOST_A))
    lease = own.try_acquire("ta", {"holder": "ha"}, ttl_s=30, durable_fence=False)
    assert lease is not None and own.holder("ta")["token"] == lease.token
    assert own.holder("ta")["token"] == lease.token and own.cache.client_id is not None, "ha may not track its leases"
    lease.release()
    assert own.holder("ta") is None
    hb_lease.release()
