"""Issue 45, holes 1 and 3: what a broker user puts on a host's queues neither kills its worker nor runs twice.

A real `panio worker` on the real Redis, with message signing on and its host's own lab file. The test plays
someone holding the worker's Redis password: it pushes raw bytes straight onto the host's queues (garbage, JSON
that is no message, messages whose content type is text, pickle or a signature that does not verify), and
captures a message the controller signed before any worker sees it, to push it again after it ran, with
every Redis key it could find deleted, and again after the worker restarted.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import uuid
import zlib

import pytest

import keyhelp
from jobhelp import job_file, wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, use_lab

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")
DROPPED = ("dropped a message that is not a signed task", "refused a message that is not signed by a trusted key")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    workers = Workers(tmp_path_factory.mktemp("intake"), SHARED_REDIS)
    yield workers
    workers.stop_all()
    drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


@pytest.fixture(scope="module")
def marks(tmp_path_factory):
    return tmp_path_factory.mktemp("marks")


@pytest.fixture(scope="module")
def lab(host, marks, tmp_path_factory):
    """h1 serves t1, whose action `count` appends a line to a file per run."""
    from conftest import Panio

    home = tmp_path_factory.mktemp("operator")
    (home / "home").mkdir()
    panio = Panio(home)
    use_lab(panio, host)
    panio("host", "add", "h1", "--ssh", "ops@h1.invalid")
    panio("target", "add", "t1", "--host", "h1")
    panio("action", "add", "count", "-t", "t1", "--command", f"sh -c 'echo run >> {marks / 'runs'}'")
    return panio


@pytest.fixture
def worker(host, lab):
    proc = host.start("h1", concurrency=2)
    yield proc
    if proc.poll() is None:
        host.kill(proc)


@pytest.fixture
def controller(host, monkeypatch):
    """A Celery app signing with the controller's key, on the workers' broker."""
    from bench_agent.jobs.worker import make_app

    for name, value in keyhelp.controller_env().items():
        monkeypatch.setenv(name, value)
    return make_app(SHARED_REDIS, host.env["PANIO_REDIS_PREFIX"])


@pytest.fixture
def redis_of(host):
    """The broker as its users see it: ``key(name)`` is a queue's list, ``r`` the client."""
    import redis

    class Broker:
        r = redis.Redis.from_url(SHARED_REDIS)

        @staticmethod
        def key(name: str) -> str:
            return f"{host.env['PANIO_REDIS_PREFIX']}celery:{name}"

        def captured(self, app, task: str, args: list) -> bytes:
            """``task`` signed by ``app``, taken off the broker before any worker saw it."""
            queue = f"capture-{uuid.uuid4().hex[:8]}"
            app.send_task(task, args=args, queue=queue)
            return self.r.rpop(self.key(queue))

        def unacked(self) -> dict:
            return self.r.hgetall(self.key("unacked"))

    return Broker()


def forged(signed: bytes, content_type: str, body: bytes | None = None, **headers) -> bytes:
    """``signed``'s envelope with another content type (body, headers): what a broker user can write."""
    envelope = json.loads(signed)
    envelope["content-type"] = content_type
    envelope["headers"].update(headers)
    envelope["properties"]["delivery_tag"] = str(uuid.uuid4())
    if body is not None:
        envelope["body"] = base64.b64encode(body).decode()
    return json.dumps(envelope).encode()


def dropped(host: Workers) -> int:
    """How many messages the workers' logs say they dropped (bad content) or refused (bad signature)."""
    logs = host.logs()
    return sum(logs.count(line) for line in DROPPED)


class Touch:
    """A pickle that creates ``path`` when it is loaded."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_messages_that_do_not_parse_or_are_not_signed_are_dropped_and_the_worker_stays_up(
        lab, host, worker, marks, controller, redis_of):
    from bench_agent.jobs.op_server import ops_queue_name
    from bench_agent.jobs.worker import OP_TASK, TASK, op_message, queue_name

    signed_job = redis_of.captured(controller, TASK, [{"job_id": 0, "target": "t1", "steps": []}])
    signed_op = redis_of.captured(controller, OP_TASK, op_message("system.ping", {}, 30, "h1"))
    unpickled = marks / "unpickled"
    hostile = [b"garbage", b"\xff\xfe not even text", b"[]", b'{"body": "x"}', b'{"properties": {}, "headers": 7}',
               b"[" * 100_000 + b"]" * 100_000]  # deeper than Python's JSON parser recurses
    for signed in (signed_job, signed_op):
        hostile += [forged(signed, "application/text"), forged(signed, "text/plain", b"hello"),
                    forged(signed, "application/x-python-serialize", pickle.dumps(Touch(unpickled))),
                    forged(signed, "application/data", b"not a signature"),
                    # a body kombu would inflate (100 MB) before any signature is checked
                    forged(signed, "application/data", zlib.compress(bytes(100 << 20)), compression="application/x-gzip")]
    # and Celery's remote-control channel, where the worker listens too (garbage there kombu itself skips)
    control = [b"[]", *(forged(signed_op, kind, body) for kind, body in (
        ("application/text", None), ("application/x-python-serialize", pickle.dumps(Touch(unpickled))),
        ("application/data", b"not a signature")))]
    # signed by the controller, but with headers (outside the signature) that make no task of it
    mangled = [forged(signed_job, "application/data", None, **h) for h in
               ({"task": ["panio.run_job"]}, {"task": "panio.nosuch"}, {"eta": "garbage"}, {"expires": "x"},
                {"eta": "2099-01-01T00:00:00+00:00"})]  # held unacknowledged until then, by each worker
    before = dropped(host)
    for queue in (queue_name("h1"), ops_queue_name("h1")):
        for raw in hostile:
            redis_of.r.lpush(redis_of.key(queue), raw)
    for raw in mangled:
        redis_of.r.lpush(redis_of.key(queue_name("h1")), raw)
    channel = f"{host.env['PANIO_REDIS_PREFIX']}celery:/{SHARED_REDIS.rsplit('/', 1)[1]}.celery.pidbox"
    for raw in control:
        assert redis_of.r.publish(channel, raw) >= 1, "the worker does not listen on its control channel"
    pushed = 2 * len(hostile) + len(control) + len(mangled)

    def all_dropped() -> bool:
        assert worker.poll() is None, f"the worker died:\n{worker.log.read_text()[-3000:]}"
        assert "Control command error" not in worker.log.read_text(), "a control message was decoded unverified"
        return dropped(host) >= before + pushed

    wait_for(all_dropped, timeout_s=60)
    assert redis_of.r.llen(redis_of.key(queue_name("h1"))) == 0
    assert redis_of.r.llen(redis_of.key(ops_queue_name("h1"))) == 0
    assert redis_of.unacked() == {}, "a refused message is left to be restored (and refused again) on restart"
    assert not unpickled.exists(), "a pickle was loaded"
    assert "Unrecoverable error" not in worker.log.read_text()

    # the worker still serves: a signed operation and a signed job run
    from bench_agent.jobs.worker import OP_TASK as op

    reply = controller.send_task(op, args=op_message("system.ping", {"payload": 3}, 30, "h1"),
                                 queue=ops_queue_name("h1")).get(timeout=30)
    assert reply == {"ok": True, "result": {"pong": 3}}
    runs = marks / "runs"
    runs.unlink(missing_ok=True)
    r = lab("job", "run", job_file(marks, "[[steps]]\nrun = 'action run ${target} count'\n"), "--target", "t1")
    assert "complete, passed" in r.out and runs.read_text() == "run\n"
    assert worker.poll() is None


def test_an_unacknowledged_entry_that_is_no_message_does_not_stop_a_worker_starting(lab, host, redis_of):
    """kombu restores what its unacknowledged hash holds when a worker starts, as written there: an entry a
    broker user wrote is dropped (and its line logged), not parsed into the worker's end on every start."""
    entries = {"forged-1": b"garbage", "forged-2": b"[1, 2]", "forged-3": b'[{"not": "a message"}, "", "host.h1"]'}
    redis_of.r.hset(redis_of.key("unacked"), mapping=entries)
    redis_of.r.zadd(redis_of.key("unacked_index"), {tag: 0 for tag in entries})
    before = dropped(host)
    proc = host.start("h1")
    try:
        def restored() -> bool:
            assert proc.poll() is None, f"the worker died:\n{proc.log.read_text()[-3000:]}"
            return not set(redis_of.unacked()) & {t.encode() for t in entries} and dropped(host) >= before + 3

        wait_for(restored, timeout_s=60)
        assert redis_of.r.llen(redis_of.key("host.h1")) == 0
        assert "Unrecoverable error" not in proc.log.read_text()
    finally:
        host.kill(proc)


def test_a_captured_operation_runs_once_whatever_redis_forgets_and_across_a_restart(lab, host, marks, controller,
                                                                                    redis_of):
    """Issue 45, hole 3: the replay guard is the host's own. A signed `action run` taken off the broker before
    the worker saw it runs once; pushed again after every Redis key under panio's prefix is deleted, and again
    after the worker restarted, it is refused as a replay and runs no more."""
    from bench_agent.jobs.op_server import ops_queue_name
    from bench_agent.jobs.worker import OP_TASK, op_message

    runs = marks / "runs"
    runs.unlink(missing_ok=True)
    raw = redis_of.captured(controller, OP_TASK, op_message("action.run", {"target": "t1", "name": "count"}, 120, "h1"))
    ops = redis_of.key(ops_queue_name("h1"))
    replays = "refused an operation message: it was seen before (a replay)"
    proc = host.start("h1")
    try:
        redis_of.r.lpush(ops, raw)
        wait_for(lambda: runs.exists() and runs.read_text() == "run\n", timeout_s=60)
        for restart in (False, True):
            if restart:
                host.kill(proc)
                proc = host.start("h1")
            drop_keys(SHARED_REDIS, host.env["PANIO_REDIS_PREFIX"])  # every key Redis holds for panio
            before = host.logs().count(replays)
            redis_of.r.lpush(ops, raw)
            wait_for(lambda: host.logs().count(replays) > before or runs.read_text() != "run\n", timeout_s=60)
            assert runs.read_text() == "run\n", f"a captured operation ran again (restarted: {restart})"
            assert redis_of.r.llen(ops) == 0
    finally:
        host.kill(proc)


def test_an_operation_signed_for_another_host_is_refused(lab, host, marks, controller, redis_of):
    """Each host keeps its own guard, so the host an operation is for is inside its signature: a message captured
    on its way to h2 (a host-wide `daemons.stop`, say) does not run on h1, whose guard never saw it."""
    from bench_agent.jobs.op_server import ops_queue_name
    from bench_agent.jobs.worker import OP_TASK, op_message

    runs = marks / "runs"
    runs.unlink(missing_ok=True)
    proc = host.start("h1")
    try:
        for stamped_for in ("h2", None):
            message = op_message("action.run", {"target": "t1", "name": "count"}, 30, stamped_for)
            reply = controller.send_task(OP_TASK, args=message, queue=ops_queue_name("h1")).get(timeout=30)
            assert reply["error"]["error"] == "refused", reply
            assert "not to this one (h1)" in reply["error"]["message"], reply
        assert not runs.exists(), "an operation signed for another host ran"
    finally:
        host.kill(proc)
