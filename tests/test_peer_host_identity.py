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

from jobhelp import job_file, wait_for
from peerhelp import REDIS, Workers, use_lab
from brokerhelp import PASSWORDS, QUICK, LockedRedis

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


def two_hosts(panio, lab: Workers) -> None:
    """Point ``panio`` at the module's lab, made once: host ha with target ta, host hb with target tb."""
    if lab.lab.exists() and "[targets.tb]" in lab.lab.read_text():
        panio.env.update({**lab.env, "PANIO_LAB": str(lab.lab)})
        panio.lab = lab.lab
        return
    use_lab(panio, lab)
    for host, target in (("ha", "ta"), ("hb", "tb")):
        panio("host", "add", host, "--ssh", f"ops@{host}.invalid")
        panio("target", "add", target, "--host", host)


def controller_client(broker):
    import redis

    return redis.Redis.from_url(broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"]),
                                decode_responses=True)


def test_a_host_runs_its_own_job_and_cannot_touch_another_hosts_queue_leases_or_reports(panio, broker, lab,
                                                                                        tmp_path, monkeypatch):
    import redis

    from bench_agent.leases.redis_store import RedisLeaseStore

    two_hosts(panio, lab)
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
    with pytest.raises(redis.exceptions.NoPermissionError, match="'eval' command"):  # no Lua of its own at all
        a.eval("return redis.call('hgetall', KEYS[1])", 1, "panio:lease:tb")
    with pytest.raises(redis.exceptions.NoPermissionError, match="keys"):  # panio's functions: checked as the caller
        a.fcall("panio_v1_release", 1, "panio:lease:tb", str(hb_lease.token), "")
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


def test_each_hosts_reconciler_finds_its_own_messages_and_sends_a_vanished_one_again(panio, broker, lab, tmp_path,
                                                                                     monkeypatch):
    """The controller's view of the broker reads every host's part; host hb's worker, as hb's own user, reads its
    own queue by name and sends again, into its own queue, a job whose message Redis lost."""
    from bench_agent.jobs.reconcile import BrokerView

    two_hosts(panio, lab)
    job = panio("job", "submit", job_file(tmp_path, "[[steps]]\nrun = 'ping ${target} --count 1'\n"), "--target",
                "tb", "--json").json()["job_id"]
    ctl_url = broker.url("panio-controller", PASSWORDS["panio_redis_controller_password"])
    monkeypatch.setenv("PANIO_BROKER_PER_HOST", "1")
    assert job in BrokerView(ctl_url, "panio:").pending()  # the controller's reconciler sees hb's queue
    ctl = controller_client(broker)
    ctl.delete("panio:h.hb:celery:host.hb")  # Redis lost hb's queue: only the results database knows the jobs
    assert job not in BrokerView(ctl_url, "panio:").pending()

    hb = Workers(tmp_path, lab.env["PANIO_BROKER"], worker_broker=broker.url("panio-host-hb", HOSTS["hb"]["password"]),
                 PANIO_REDIS_PREFIX="panio:", PANIO_BROKER_PER_HOST="1", PANIO_RESULTS_URL=lab.env["PANIO_RESULTS_URL"])
    hb.lab = lab.lab
    try:
        worker = hb.start("hb")
        done = wait_for(lambda: (j := lab.store().job(job))["state"] == "done" and j, timeout_s=90, every_s=0.3)
        assert (done["health"], done["result"]) == ("complete", "passed"), done
        log = worker.log.read_text()
        assert "sent again" in log and "NOPERM" not in log and "NoPermission" not in log, log[-3000:]
    finally:
        hb.stop_all()


def test_a_monitor_follows_one_hosts_events_through_the_controllers_user(lab, monkeypatch):
    """What Flower reads, with keys per host: the controller's user subscribes to host ha's event channel."""
    import threading

    import keyhelp
    from bench_agent.jobs.worker import OP_TASK, for_host, make_app, op_message, queue_name

    lab.stop_all()  # ha's worker without events would take the pings below
    lab.start("ha", "--events")
    for name, value in {**keyhelp.controller_env(), "PANIO_BROKER_PER_HOST": "1"}.items():
        monkeypatch.setenv(name, value)
    app = for_host(make_app(lab.env["PANIO_BROKER"], "panio:"), "ha")
    got: list[dict] = []

    def monitor() -> None:
        def seen(event: dict) -> None:
            if event["type"] == "task-succeeded":
                got.append(event)
                receiver.should_stop = True

        with app.connection_for_read() as conn:
            receiver = app.events.Receiver(conn, handlers={"*": seen})
            receiver.capture(limit=None, timeout=60)

    watching = threading.Thread(target=monitor, daemon=True)
    watching.start()

    def a_ping_is_seen() -> bool:
        reply = app.send_task(OP_TASK, args=op_message("system.ping", {"payload": 7}, 30, "ha"),
                              queue=queue_name("ha")).get(timeout=30)  # the job pool's consumer sends events
        assert reply == {"ok": True, "result": {"pong": 7}}
        watching.join(timeout=2)
        return bool(got)

    wait_for(a_ping_is_seen, timeout_s=90, every_s=0)
    assert got and got[0]["hostname"].startswith("ha."), got
