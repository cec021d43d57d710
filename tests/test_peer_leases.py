"""Leases against real peers: a redis-server without persistence restarted under a job, the host's own
lease check on every road (CLI in-process, the SSH agent's JSON lines, a raw Celery `panio.op` message),
and what a job may run. Each test here failed before the fix it guards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench_agent.errors import Busy, Refused
from bench_agent.leases import base as leases
from bench_agent.leases import file_store as file_leases
from bench_agent.leases import redis_store as redis_leases
from bench_agent.leases.fences import FenceStore
import keyhelp
from conftest import PANIO
from jobhelp import job_file, stop, stop_group, wait_for
from peerhelp import REDIS, SHARED_REDIS, PrivateRedis, agent_call, free_port

needs_redis = pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-server not installed (scripts/system-deps.sh)")


class VolatileRedis(PrivateRedis):
    """A private redis-server with no persistence at all (no RDB, no AOF), as many labs run it; stopped by SIGKILL."""

    def restart(self) -> None:
        """Kill it and start a fresh one on the same port: every key, fencing counters included, is gone."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def volatile(tmp_path):
    r = VolatileRedis(tmp_path)
    r.start()
    yield r
    r.stop()


# --- item 4: fencing tokens never go backwards -------------------------------------------------------

@needs_redis
def test_a_volatile_redis_restart_never_hands_out_a_token_twice(volatile, tmp_path):
    store = redis_leases.RedisLeaseStore(volatile.url, "t:", FenceStore(f"sqlite:///{tmp_path / 'results.db'}"))
    a = store.try_acquire("pico", {"holder": "a"}, ttl_s=30)
    volatile.restart()  # a's lease and the counter that issued its token are gone
    b = leases.acquire(store, "pico", {"holder": "b"}, ttl_s=30, wait_s=5)
    assert b.token > a.token
    with pytest.raises(Refused):
        a.check()  # before: b held the same token, so a's fence still matched and both drove the board
    with pytest.raises(Busy, match="leased by b"):
        leases.access("pico", a.token, [store.current("pico")])
    b.release()
    volatile.restart()
    c = leases.acquire(store, "pico", {"holder": "c"}, ttl_s=30, wait_s=5)
    assert c.token > b.token
    c.release()


@needs_redis
def test_a_job_cut_off_by_a_redis_restart_never_shares_its_token(panio, tmp_path, volatile):
    panio.env.update(PANIO_REDIS_URL=volatile.url, PANIO_REDIS_PREFIX="t:",
                     PANIO_RESULTS_URL=f"sqlite:///{tmp_path / 'results.db'}")
    panio("init")
    panio("target", "add", "pico")
    long_job = job_file(tmp_path, "target = 'pico'\nlease_ttl_s = 2\n[[steps]]\n"
                                  "run = 'ping ${target} --count 150 --interval 0.1'\n", "long.toml")
    quick = job_file(tmp_path, "target = 'pico'\n[[steps]]\nrun = 'ping ${target} --count 3'\n", "quick.toml")
    first = subprocess.Popen([PANIO, "job", "run", long_job], env=panio.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: panio("lease", "list", "--json").json(), timeout_s=30)
        volatile.restart()
        second = panio("job", "run", quick, check=False)
        first.communicate(timeout=60)
    finally:
        stop(first)
    a, b = (panio("job", "status", str(i), "--json").json() for i in (1, 2))
    assert second.code == 0, second.err
    assert b["fence"] > a["fence"], (a["fence"], b["fence"])  # a's row names the token it holds last
    if a["health"] == "incomplete":  # the second job took the target first: the first never acts again
        assert first.returncode in (8, 13)  # (before: it kept passing its fence check on b's lease)
        assert "lease lost" in a["reason"], a
    else:  # the first retook its lease (Redis lost it, nobody had the target since) and went on; b waited for it
        assert (a["health"], a["result"], first.returncode) == ("complete", "passed", 0), a
        assert b["started_at"] >= a["finished_at"], (a, b)


# --- item 8: the host enforces leases, whatever the caller's environment ------------------------------

def hooked_lab(panio, tmp_path: Path) -> Path:
    """pico, whose power-on hook and action `flash` leave a file behind when they run."""
    marks = tmp_path / "marks"
    marks.mkdir()
    panio("init")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--on-cmd", f"touch {marks / 'powered'}")
    panio("action", "add", "flash", "-t", "pico", "--command", f"touch {marks / 'flashed'}")
    return marks


def test_a_shell_without_the_broker_cannot_drive_a_leased_target(panio, tmp_path, prefix):
    marks = hooked_lab(panio, tmp_path)
    panio("lease", "store", "--set", SHARED_REDIS, "--prefix", prefix)  # what `panio worker` records
    assert "PANIO_BROKER" not in panio.env and "PANIO_REDIS_URL" not in panio.env
    store = redis_leases.RedisLeaseStore(SHARED_REDIS, prefix,
                                   FenceStore(f"sqlite:///{tmp_path / 'fences.db'}")).for_lab(panio.lab_key)
    lease = store.try_acquire("pico", {"holder": "worker bench1@ctl:77", "job": 7}, ttl_s=600)
    try:
        assert panio("lease", "list", "--json").json()[0]["job"] == 7  # before: "no leases held"
        for argv in (("power", "on", "pico"), ("action", "run", "pico", "flash")):
            r = panio.fails(*argv, code=8)
            assert r.error["holder"] == "worker bench1@ctl:77" and "job 7" in r.err
        assert not list(marks.iterdir()), "a hook ran on a leased target"

        # The host side, with no controller in front: the SSH agent's own check. Reads pass while leased.
        power = {"on_cmd": f"touch {marks / 'powered'}"}
        assert agent_call(panio.env, "power.state", {"target": "pico", "power": power})["ok"]
        reply = agent_call(panio.env, "power.on", {"target": "pico", "power": power})
        assert reply["error"]["error"] == "busy" and reply["error"]["job"] == 7
        assert not list(marks.iterdir())
        reply = agent_call(panio.env, "power.on", {"target": "pico", "power": power,
                                                   "lease_token": lease.credential})
        assert reply["ok"], reply  # the holder's own step presents its lease's credential and passes
        assert (marks / "powered").exists()
    finally:
        lease.release()


@pytest.mark.parametrize("kind", ["redis", "file"])
def test_the_token_lease_list_shows_does_not_act_for_the_holder(panio, tmp_path, prefix, kind):
    """Issue 22, item 7: before, `PANIO_LEASE_TOKEN=<the number lease list printed>` drove a leased board."""
    marks = hooked_lab(panio, tmp_path)
    if kind == "redis":
        panio("lease", "store", "--set", SHARED_REDIS, "--prefix", prefix)
        store = redis_leases.RedisLeaseStore(SHARED_REDIS, prefix,
                                   FenceStore(f"sqlite:///{tmp_path / 'fences.db'}")).for_lab(panio.lab_key)
    else:  # an embedded `panio job run`'s lease: a file in the lab's state directory
        store = file_leases.FileLeaseStore(panio.state / "leases")
    lease = store.try_acquire("pico", {"holder": "job runner", "job": 5}, ttl_s=600)
    try:
        listed = panio("lease", "list", "--json").json()
        assert [le["token"] for le in listed] == [lease.token]
        shown = panio("lease", "list").out
        assert lease.secret not in json.dumps(listed) and lease.secret not in shown
        if kind == "file":
            assert (store.dir / "pico.lease").stat().st_mode & 0o077 == 0, "the lease file is readable by others"
        for token in (str(lease.token), f"{lease.token}:{'0' * 32}"):  # the number alone, or a guessed secret
            other = {**panio.env, "PANIO_LEASE_TOKEN": token}
            r = subprocess.run([PANIO, "power", "on", "pico"], env=other, capture_output=True, text=True, timeout=60)
            assert r.returncode == 8 and "without its holder's secret" in r.stderr, r.stderr
            reply = agent_call(panio.env, "action.run", {"target": "pico", "name": "flash",
                                                         "command": f"touch {marks / 'flashed'}", "lease_token": token})
            assert reply["error"]["error"] == "busy", reply
        assert not list(marks.iterdir()), "a process with only the listed number drove the leased board"
        holder = {**panio.env, "PANIO_LEASE_TOKEN": lease.credential}
        r = subprocess.run([PANIO, "power", "on", "pico"], env=holder, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert (marks / "powered").exists()
    finally:
        lease.release()


def test_an_expired_token_is_refused_even_while_the_lease_is_free(panio, tmp_path, prefix):
    marks = hooked_lab(panio, tmp_path)
    panio.env.update(PANIO_REDIS_URL=SHARED_REDIS, PANIO_REDIS_PREFIX=prefix)
    store = redis_leases.RedisLeaseStore(SHARED_REDIS, prefix,
                                   FenceStore(f"sqlite:///{tmp_path / 'fences.db'}")).for_lab(panio.lab_key)
    lease = store.try_acquire("pico", {"holder": "stalled"}, ttl_s=0.3)  # no keeper: it lapses
    wait_for(lambda: store.current("pico") is None, timeout_s=30, every_s=0.05)
    panio.env["PANIO_LEASE_TOKEN"] = str(lease.token)
    r = panio.fails("power", "on", "pico", code=13)
    assert "not current" in r.err
    reply = agent_call({k: v for k, v in panio.env.items() if k != "PANIO_LEASE_TOKEN"}, "action.run",
                       {"target": "pico", "name": "flash", "command": f"touch {marks / 'flashed'}",
                        "lease_token": lease.token})
    assert reply["error"]["error"] == "refused"
    assert not list(marks.iterdir()), "a holder kept acting after its lease expired"


def test_a_raw_celery_message_cannot_act_on_a_leased_target(panio, tmp_path, prefix, monkeypatch):
    """`panio worker` records its lease store; a signed `panio.op` for action.run is refused while leased."""
    from bench_agent.jobs.worker import OP_TASK, make_app, op_message, queue_name

    state = tmp_path / "host-state"
    flashed = tmp_path / "flashed"
    panio("init")
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("target", "add", "b1a", "--host", "bench1")
    panio("action", "add", "flash", "-t", "b1a", "--command", f"touch {flashed}")
    env = {**panio.env, "PANIO_BROKER": SHARED_REDIS, "PANIO_REDIS_PREFIX": prefix, "PANIO_STATE_DIR": str(state),
           "PANIO_RESULTS_URL": f"sqlite:///{tmp_path / 'results.db'}", **keyhelp.worker_env()}
    log = tmp_path / "worker.log"
    worker = subprocess.Popen([PANIO, "worker", "--host", "bench1", "--lab", str(panio.lab), "--concurrency", "1"],
                              env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    store = redis_leases.RedisLeaseStore(SHARED_REDIS, prefix,  # the lab's: a raw message naming no lab is bound by it
                                   FenceStore(f"sqlite:///{tmp_path / 'results.db'}")).for_lab(panio.lab_key)
    for name, value in keyhelp.controller_env().items():
        monkeypatch.setenv(name, value)
    app = make_app(SHARED_REDIS, prefix)
    request = {"target": "b1a", "name": "flash", "command": f"touch {flashed}", "timeout_s": 10}
    try:
        wait_for(lambda: "ready." in log.read_text() or worker.poll() is not None, timeout_s=60)
        assert worker.poll() is None, log.read_text()
        recorded = json.loads((state / "lease-stores.json").read_text())["stores"]
        assert recorded[0]["url"] == SHARED_REDIS and recorded[0]["prefix"] == prefix
        lease = store.try_acquire("b1a", {"holder": "job runner", "job": 3}, ttl_s=600)
        reply = app.send_task(OP_TASK, args=op_message("action.run", request, 30, "bench1"),
                              queue=queue_name("bench1")).get(timeout=30)
        assert not reply["ok"] and reply["error"]["error"] == "busy" and reply["error"]["job"] == 3
        assert not flashed.exists(), "a message on the broker ran a command on a leased target"
        shell = {**panio.env, "PANIO_STATE_DIR": str(state)}  # a shell on that host, no PANIO_BROKER
        listed = subprocess.run([PANIO, "lease", "list", "--json"], env=shell, capture_output=True, text=True)
        assert json.loads(listed.stdout)[0]["target"] == "b1a"
        lease.release()
        reply = app.send_task(OP_TASK, args=op_message("action.run", request, 30, "bench1"),
                              queue=queue_name("bench1")).get(timeout=30)
        assert reply["ok"] and flashed.exists()  # the road itself works once the target is free
    finally:
        stop_group(worker)


# --- item 9: a job runs runtime commands only and never changes the operator's lab --------------------

EVIL = ("target = 'pico'\n[[steps]]\nrun = \"power set -t pico --cycle-cmd \\\"sh -c 'touch {mark}'\\\"\"\n"
        "[[steps]]\nrun = 'power-cycle pico'\n")


def test_a_job_cannot_configure_a_hook_or_edit_the_lab(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    before = panio.lab.read_bytes()
    mark = tmp_path / "pwned"
    path = job_file(tmp_path, EVIL.format(mark=mark))
    for verb in ("check", "run"):
        r = panio.fails("job", verb, path, code=5)
        assert "`panio power set` cannot run inside a job" in r.err and "job.toml:3:1" in r.err
    assert panio.lab.read_bytes() == before and not mark.exists()


def test_a_hand_made_payload_is_refused_at_run_time(panio, tmp_path):
    """What a broker message could carry, bypassing `job check`: a step that names no runtime command is refused."""
    panio("init")
    panio("target", "add", "pico")
    before = panio.lab.read_bytes()
    mark = tmp_path / "pwned"
    script = f"""
import json, sys
from bench_agent.leases.file_store import FileLeaseStore
from bench_agent.results.store import ResultStore
from bench_agent.jobs.runner import JobRunner
store = ResultStore("sqlite:///{tmp_path / 'r.db'}")
steps = [{{"name": "hook", "argv": ["power", "set", "-t", "pico", "--cycle-cmd", "sh -c 'touch {mark}'"],
          "run": {{"op": "power.set", "args": {{"target": "pico", "cycle_cmd": "sh -c 'touch {mark}'"}}}},
          "command": "x", "timeout_s": 30, "expect_exit": [0]}},
         {{"name": "old", "argv": ["power", "set", "-t", "pico"], "command": "y", "timeout_s": 30, "expect_exit": [0]}}]
job_id = store.create_job("evil", "pico", None, {{}})
payload = {{"job_id": job_id, "name": "evil", "target": "pico", "steps": steps, "timeout_s": None}}
out = JobRunner(store, FileLeaseStore("{tmp_path / 'leases'}"), "t").run(payload)
print(json.dumps([out, store.job(job_id)["steps"]]))
"""
    p = subprocess.run([sys.executable, "-c", script], env=panio.env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    summary, steps = json.loads(p.stdout)
    assert summary["health"] == "incomplete" and steps[0]["exit_status"] == 13
    assert "is not a runtime command" in steps[0]["output"]
    assert panio.lab.read_bytes() == before and not mark.exists()

    # A step that names another lab file is refused too (the runner passes the job's own with --lab).
    r = subprocess.run([PANIO, "--lab", str(panio.lab), "--lab", "/elsewhere.toml", "ping", "pico"],
                       env={**panio.env, "PANIO_LEASE_TOKEN": "1"}, capture_output=True, text=True)
    assert r.returncode == 13 and "drop --lab" in r.stderr


def test_mcp_tools_are_runtime_commands():
    from controller.cli.commands import is_runtime
    from controller.mcp.tools import TOOLS

    for tool in TOOLS:
        sub = tool.command[1] if len(tool.command) > 1 and not tool.command[1].startswith("-") else None
        if tool.records:  # the lab's records (bisect_status): the controller's reads, read-only, no target
            assert not is_runtime(tool.command[0], sub) and tool.annotations()["readOnlyHint"], tool.command
            assert "target" not in tool.input_schema()["properties"], tool.command
            continue
        assert is_runtime(tool.command[0], sub), tool.command


# --- item 12: steps are panio, whatever is in the working directory -----------------------------------

def test_a_projects_own_controller_package_cannot_stand_in_for_panio(panio, tmp_path):
    project = tmp_path / "project"
    fake = project / "controller" / "cli"
    fake.mkdir(parents=True)
    (project / "controller" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "main.py").write_text("print('FAKE controller: every step passes')\n")
    panio("init")
    panio("target", "add", "pico")
    path = job_file(tmp_path, "target = 'pico'\n[[steps]]\nrun = 'ping ${target} --count 2'\n")
    r = subprocess.run([PANIO, "job", "run", path], cwd=project, env=panio.env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    logs = panio("job", "logs", "1").out
    assert "seq=2" in logs and "FAKE" not in logs


def test_an_embedded_job_drives_a_target_on_an_ssh_host(panio, tmp_path):
    """The job's file lease lives on the controller, where the host cannot see it: the host lets the job's
    token through (it checks its own stores for other holders) instead of refusing it as stale."""
    from sshd import Sshd

    sshd = Sshd(tmp_path / "sshd", tmp_path / "home")
    try:
        panio("init")
        panio("host", "add", "bench", "--ssh", f"{sshd.user}@127.0.0.1", "--port", str(sshd.port),
              "--python", sys.executable)
        panio("host", "trust", "bench")
        panio("target", "add", "far", "--host", "bench")
        powered = tmp_path / "powered"
        panio("power", "set", "-t", "far", "--on-cmd", f"touch {powered}")
        body = "target = 'far'\n[[steps]]\nrun = 'power on ${target}'\n"
        panio("job", "run", job_file(tmp_path, body))
        assert panio("job", "status", "1", "--json").json()["result"] == "passed" and powered.exists()
    finally:
        sshd.stop()


def test_lease_store_records_and_refuses_bad_input(panio, tmp_path):
    marks = hooked_lab(panio, tmp_path)
    record = Path(panio.env["PANIO_STATE_DIR"]) / "lease-stores.json"
    panio.fails("lease", "store", "--set", "http://ctl:6379", code=2)
    panio.fails("lease", "store", "--forget", "redis://nowhere:6379/0", code=3)
    assert not record.exists()
    dead = f"redis://:hunter2@127.0.0.1:{free_port()}/0"  # nothing listens there
    shown = panio("lease", "store", "--set", dead, "--json").json()
    assert shown[0]["url"].endswith("***@127.0.0.1:" + dead.rsplit(":", 1)[1]) and "hunter2" not in str(shown)
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    r = panio.fails("power", "on", "pico", code=4)  # a check that cannot be made is not a pass
    assert "hunter2" not in r.err
    reply = agent_call(panio.env, "power.on", {"target": "pico", "power": {"on_cmd": f"touch {marks / 'powered'}"}})
    assert reply["error"]["error"] == "unreachable" and "cannot check the lease on 'pico'" in reply["error"]["message"]
    assert "hunter2" not in json.dumps(reply)
    assert not list(marks.iterdir())
    panio.fails("lease", "store", "--set", dead, "--forget", dead, code=2)
    panio("lease", "store", "--forget", dead)
    panio("power", "on", "pico")
    assert (marks / "powered").exists()


def test_mcp_tools_cannot_change_a_leased_target(panio, tmp_path, prefix):
    """The MCP road: an agent harness's `panio mcp`, started without the broker, on a worker's host."""
    import anyio

    from mcp_client import connect, failure

    marks = hooked_lab(panio, tmp_path)
    panio("lease", "store", "--set", SHARED_REDIS, "--prefix", prefix)
    store = redis_leases.RedisLeaseStore(SHARED_REDIS, prefix,
                                   FenceStore(f"sqlite:///{tmp_path / 'fences.db'}")).for_lab(panio.lab_key)
    lease = store.try_acquire("pico", {"holder": "worker bench1@ctl:77", "job": 9}, ttl_s=600)

    async def go():
        async with connect(panio.env) as c:
            return [await c.call(tool, {"target": "pico", **extra})
                    for tool, extra in (("power_on", {}), ("action_run", {"name": "flash"}))]

    try:
        for is_error, text in anyio.run(go):
            code, obj = failure(text)
            assert is_error and code == 8 and obj["holder"] == "worker bench1@ctl:77" and obj["job"] == 9
    finally:
        lease.release()
    assert not list(marks.iterdir())
