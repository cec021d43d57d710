"""Issue 22, items 1 and 2: a broker message is not a root shell on a control host.

A real `panio worker` (Celery on the real Redis) with message signing on and its host's own lab file.
Messages are put straight on the broker, the way anyone who reaches Redis could: unsigned, signed with a
key the worker does not trust, signed by the controller but naming another command or hook than the
host's, or a target the host does not serve. None of them runs anything (a marker file the command would
create stays absent), and each refusal is in the worker's log. The controller's own signed message runs.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

import keyhelp
from conftest import PANIO
from jobhelp import wait_for
from peerhelp import SHARED_REDIS, Workers, drop_keys, use_lab

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/redis-server"), reason="redis-server not installed")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    workers = Workers(tmp_path_factory.mktemp("signing"), SHARED_REDIS)
    yield workers
    workers.stop_all()
    drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


@pytest.fixture(scope="module")
def marks(tmp_path_factory):
    return tmp_path_factory.mktemp("marks")


@pytest.fixture(scope="module")
def lab(host, marks, tmp_path_factory):
    """h1 serves t1 (an action and power hooks that touch marker files); t2 belongs to h2."""
    from conftest import Panio

    home = tmp_path_factory.mktemp("operator")
    (home / "home").mkdir()
    panio = Panio(home)
    use_lab(panio, host)
    for name in ("h1", "h2"):
        panio("host", "add", name, "--ssh", f"ops@{name}.invalid")
    panio("target", "add", "t1", "--host", "h1")
    panio("target", "add", "t2", "--host", "h2")
    panio("action", "add", "flash", "-t", "t1", "--command", f"touch {marks / 'flashed'}")
    panio("power", "set", "-t", "t1", "--cycle-cmd", f"touch {marks / 'cycled'}")
    panio("action", "add", "flash", "-t", "t2", "--command", f"touch {marks / 't2-flashed'}")
    host.start("h1", concurrency=2)
    return panio


@pytest.fixture
def app_signed_by(host, monkeypatch, tmp_path):
    """``app_signed_by(env)``: a Celery app on the workers' broker signing with ``env``'s keys, or sending plain
    JSON (None). Celery keeps one signing serializer per process: use each app before making the next."""
    from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV
    from bench_agent.jobs.worker import make_app

    def make(env: dict[str, str] | None):
        for name in (KEY_ENV, CERT_ENV, STORE_ENV):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "no-keys"))
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        return make_app(SHARED_REDIS, host.env["PANIO_REDIS_PREFIX"], insecure=env is None)

    return make


def send_op(app, op: str, args: dict, wait: bool = True, message: list | None = None):
    """A ``panio.op`` as the controller sends it (stamped), or ``message`` as given."""
    from bench_agent.jobs.op_server import ops_queue_name
    from bench_agent.jobs.worker import OP_TASK, op_message

    pending = app.send_task(OP_TASK, args=message or op_message(op, args, 30, "h1"), queue=ops_queue_name("h1"))
    return pending.get(timeout=30) if wait else pending.id


def log_says(host: Workers, text: str, times: int = 1) -> bool:
    return host.logs().count(text) >= times


def test_unsigned_and_foreign_signed_messages_run_nothing(lab, host, marks, app_signed_by):
    evil = marks / f"evil-{uuid.uuid4().hex[:6]}"
    request = {"target": "t1", "name": "flash", "command": f"touch {evil}"}
    before = host.logs().count("refused a message that is not signed by a trusted key")
    task_id = send_op(app_signed_by(None), "action.run", request, wait=False)
    intruder = keyhelp.pair(f"intruder-{uuid.uuid4().hex[:6]}")  # a key pair of its own: nobody trusts it
    forged_id = send_op(app_signed_by(intruder), "action.run", request, wait=False)
    wait_for(lambda: log_says(host, "refused a message that is not signed by a trusted key", before + 2),
             timeout_s=30)
    logs = host.logs()
    assert task_id in logs and "untrusted content of type 'application/json'" in logs  # the unsigned one
    assert forged_id in logs and "Unknown certificate" in logs  # signed, but by a key it does not know
    time.sleep(1)
    assert not evil.exists(), "a message nobody trusted signed ran a command"

    # the controller's own signed message runs: the action the host's configuration has for t1
    reply = send_op(app_signed_by(keyhelp.controller_env()), "action.run",
                    {"target": "t1", "name": "flash", "command": f"touch {marks / 'flashed'}"})
    assert reply["ok"], reply
    assert (marks / "flashed").exists()


def test_a_signed_message_cannot_name_another_command_or_hook(lab, host, marks, app_signed_by):
    app = app_signed_by(keyhelp.controller_env())
    evil = marks / "signed-evil"
    tries = [
        ("action.run", {"target": "t1", "name": "flash", "command": f"touch {evil}"}),
        ("action.run", {"target": "t1", "name": "other", "command": f"touch {evil}"}),
        ("power.cycle", {"target": "t1", "power": {"cycle_cmd": f"touch {evil}"}}),
        ("power.on", {"target": "t1", "power": {"levels": {"x": {"on_cmd": f"touch {evil}"}}}, "level": "x"}),
        ("netif.down_hard", {"target": "t1", "netboot": {"interface": "lo", "hard_down": "hook",
                                                         "hard_down_cmd": f"touch {evil}"}}),
        ("system.doctor", {"config": {"actions": {"x": {"command": f"touch {evil}"}}}}),
    ]
    for op, args in tries:
        reply = send_op(app, op, args)
        assert not reply["ok"] and reply["error"]["error"] == "refused", (op, reply)
        assert "h1" in reply["error"]["message"], reply
    assert not evil.exists()
    assert log_says(host, "refused a broker request on host h1", len(tries))
    # the same operations with the host's own configuration run (the message may omit it: the host has it)
    assert send_op(app, "power.cycle", {"target": "t1"})["ok"] and (marks / "cycled").exists()


def test_a_signed_operation_runs_once_and_only_in_its_window(lab, host, marks, app_signed_by):
    """A signature does not say when: a captured message sent again, an old one, or one without its stamp
    (what a message's sender puts inside its signed body) is refused."""
    from bench_agent.jobs.signing import op_stamp

    app = app_signed_by(keyhelp.controller_env())
    request = {"target": "t1", "name": "flash", "command": f"touch {marks / 'flashed'}"}
    message = ["action.run", request, op_stamp(30, "h1")]
    assert send_op(app, "", {}, message=message)["ok"]
    (marks / "flashed").unlink()
    replayed = send_op(app, "", {}, message=message)
    assert replayed["error"]["error"] == "refused" and "seen before" in replayed["error"]["message"]
    old = {**op_stamp(30, "h1"), "sent_at": time.time() - 3600}
    for stale in (["action.run", request, old], ["action.run", request]):
        reply = send_op(app, "", {}, message=stale)
        assert reply["error"]["error"] == "refused", reply
    assert not (marks / "flashed").exists()
    assert log_says(host, "refused an operation message: it was seen before (a replay)")


def test_a_target_the_host_does_not_serve_is_refused(lab, host, marks, app_signed_by):
    app = app_signed_by(keyhelp.controller_env())
    for target, why in (("t2", "belongs to host 'h2'"), ("nosuch", "not in this host's configuration")):
        reply = send_op(app, "action.run", {"target": target, "name": "flash",
                                            "command": f"touch {marks / 't2-flashed'}"})
        assert not reply["ok"] and reply["error"]["error"] == "refused" and why in reply["error"]["message"], reply
        reply = send_op(app, "serial.log", {"target": target, "iface": {"name": "console", "device": "/dev/null"}})
        assert reply["error"]["error"] == "refused", reply  # reads too: not this host's target
    assert not (marks / "t2-flashed").exists()


def test_a_forged_job_payload_runs_no_hook(lab, host, marks, app_signed_by):
    """A signed `panio.run_job` whose steps carry another hook than the host's: the step is refused, the job
    ends incomplete; one for a target of another host ends refused before anything runs."""
    from bench_agent.jobs.worker import submit

    app = app_signed_by(keyhelp.controller_env())
    store = host.store()
    evil = marks / "job-evil"
    step = {"name": "cycle", "argv": ["power-cycle", "t1"], "command": "panio power-cycle t1", "timeout_s": 20,
            "run": {"op": "power.cycle", "args": {"target": "t1", "power": {"cycle_cmd": f"touch {evil}"},
                                                  "sense": None, "level": None}},
            "expect_exit": [0], "capture": {}}
    results = []
    for target, host_name in (("t1", "h1"), ("t2", "h1")):
        payload = {"name": "forged", "target": target, "steps": [step], "timeout_s": 60, "lease_wait_s": 10,
                   "lease_ttl_s": 10, "target_config": {"host": host_name, "power": {"cycle_cmd": f"touch {evil}"}}}
        payload["job_id"] = store.create_job("forged", target, host_name, payload)
        submit(app, payload, host_name)
        results.append(wait_for(lambda j=payload["job_id"]: (r := store.job(j))["state"] == "done" and r,
                                timeout_s=60))
    mine, other = results
    assert mine["health"] == "incomplete" and mine["steps"][0]["status"] == "error", mine
    assert "differs from this host's configuration" in mine["steps"][0]["output"]
    assert (other["health"], other["error"]["error"]) == ("incomplete", "refused") and other["steps"] == []
    assert "belongs to host 'h2'" in other["reason"]
    assert not evil.exists()
    assert log_says(host, f"job {other['id']} refused")


def test_the_controllers_commands_run_through_the_signed_road(lab, host, marks):
    """What an operator types goes through: a job and a runtime command over the host's Celery worker."""
    (marks / "cycled").unlink(missing_ok=True)
    lab("host", "set", "h1", "--transport", "celery")
    lab("power-cycle", "t1")
    assert (marks / "cycled").exists()
    body = "[[steps]]\nrun = 'action run ${target} flash'\n"
    (marks / "flashed").unlink(missing_ok=True)
    job = marks / "job.toml"
    job.write_text(body)
    r = lab("job", "run", str(job), "--target", "t1")
    assert "complete, passed" in r.out and (marks / "flashed").exists()


def test_a_worker_does_not_start_unsigned_or_without_its_configuration(lab, host, tmp_path):
    env = {**os.environ, **host.env, "PANIO_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    for name in ("PANIO_SIGNING_KEY", "PANIO_SIGNING_CERT", "PANIO_CERT_STORE"):
        env.pop(name)
    argv = [PANIO, "worker", "--host", "h9", "--lab", str(host.lab)]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "no message-signing keys" in r.stderr, r.stderr
    r = subprocess.run([PANIO, "worker", "--host", "h9", "--lab", str(tmp_path / "none.toml")],
                       env={**env, **keyhelp.worker_env()}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "no host configuration" in r.stderr, r.stderr
    # --insecure-unsigned starts it, saying so loudly
    log = tmp_path / "insecure.log"
    proc = subprocess.Popen([*argv, "--insecure-unsigned"], env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "ready." in log.read_text() or proc.poll() is not None, timeout_s=60)
        assert proc.poll() is None and "INSECURE: broker messages are NOT signed" in log.read_text()
    finally:
        host.procs.append(proc)
        proc.log = log


def test_action_arguments_reach_the_host_as_words_within_its_own_max_args(lab, host, marks, app_signed_by):
    """Issue 42: `action run TARGET NAME ARG...` through the real worker: each argument one word of the host's
    command (`touch` makes one file named by it, `;` and all), and the limit is the host's file's: a message
    that raises max_args is refused, arguments to an action the host's file lets take none are a usage error."""
    stamps = marks / "stamps"
    stamps.mkdir(exist_ok=True)
    lab("action", "add", "stamp", "-t", "t1", "--command", "touch", "--max-args", "2")
    lab("host", "set", "h1", "--transport", "celery")
    odd = stamps / "a b; touch pwned $(id)"
    lab("action", "run", "t1", "stamp", "--", str(odd), str(stamps / "-second"))
    assert sorted(p.name for p in stamps.iterdir()) == ["-second", odd.name]

    app = app_signed_by(keyhelp.controller_env())
    evil = stamps / "evil"
    raised = send_op(app, "action.run", {"target": "t1", "name": "stamp", "args": [str(evil)] * 3, "max_args": 3})
    assert not raised["ok"] and raised["error"]["error"] == "refused", raised
    assert "max_args differs" in raised["error"]["message"]
    none = send_op(app, "action.run", {"target": "t1", "name": "flash", "args": [str(evil)]})
    assert not none["ok"] and none["error"]["error"] == "usage", none
    assert "takes no arguments" in none["error"]["message"]
    assert not evil.exists() and not (stamps / "pwned").exists()
