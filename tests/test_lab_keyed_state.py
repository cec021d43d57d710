"""Issue 23, item 4: two labs (or two people) on one control host, each with a target ``h``, never see or stop
each other's captures, logs or leases.

Before, the host kept a target's state under its bare name: a fresh lab's ``h`` continued at "epoch 2" from
another lab's ``h`` in the same home. Each lab here is a lab file in a directory of its own; both share one
state directory (one user on one control host), reached in-process and over a real OpenSSH on loopback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench_agent.sim.console import SimConsole
from conftest import Panio
from peerhelp import SHARED_REDIS, agent_call
from serial_fixtures import kill_and_reap, supervisor_pids
from sshd import Sshd


def _two_labs(tmp: Path) -> tuple[Panio, Panio]:
    """Labs ``a`` and ``b``, each in a directory of its own, sharing this user's home and state directory."""
    labs = []
    for name in ("a", "b"):
        (tmp / name).mkdir()
        p = Panio(tmp / name)
        p.env.update(PANIO_STATE_DIR=str(tmp / "state"), HOME=str(tmp / "home"))
        labs.append(p)
    (tmp / "home").mkdir()
    return labs[0], labs[1]


@pytest.fixture
def boards(tmp_path):
    """One simulated board per lab, each printing its own lab's name first thing at power-on."""
    sims = {name: SimConsole(str(tmp_path / f"console-{name}"), banner=f"board of lab {name}", boot_s=0.1,
                             countdown_s=0.2, powered=False) for name in ("a", "b")}
    for sim in sims.values():
        sim.start()
    yield sims
    for state in (tmp_path / "state", tmp_path / "host-state"):
        for pid in supervisor_pids(state):
            kill_and_reap(pid)
    for sim in sims.values():
        sim.close()


def _status(p: Panio) -> dict:
    """``serial status h``: the capture's epoch, its pid and whether it runs."""
    r = p("serial", "status", "h", "--json", check=False)
    assert r.code in (0, 10), r.err  # 10: not capturing, the JSON is printed all the same
    s = r.json()
    return {"epoch": s["epoch"], "pid": s["process"]["pid"], "capturing": s["process"]["state"] == "running"}


def _captures_apart(a: Panio, b: Panio, boards: dict) -> None:
    """Both labs capture their own ``h``: separate epochs, logs and daemons; stopping one leaves the other."""
    a("serial", "watch", "h")
    b("serial", "watch", "h")
    sa, sb = _status(a), _status(b)
    assert sa["epoch"] == sb["epoch"] == 1, (sa, sb)  # before: b's h continued at epoch 2 from a's
    assert sa["pid"] != sb["pid"]
    for name, p in (("a", a), ("b", b)):
        boards[name].power_on()
        p("serial", "wait", "h", "--epoch", "1", "--since", "0", "--pattern", f"board of lab {name}",
          "--timeout-ms", "60000", timeout=90)
    assert "board of lab b" not in a("serial", "log", "h").out
    assert "board of lab a" not in b("serial", "log", "h").out

    a("serial", "stop", "h")
    assert _status(a)["capturing"] is False
    after = _status(b)
    assert after["capturing"] is True and after["pid"] == sb["pid"], after  # a's stop left b's capture alone
    a("serial", "watch", "h")
    assert (_status(a)["epoch"], _status(b)["epoch"]) == (2, 1)  # each lab counts its own captures


def test_two_labs_on_this_machine_keep_their_captures_of_h_apart(tmp_path, boards):
    a, b = _two_labs(tmp_path)
    for name, p in (("a", a), ("b", b)):
        p("init")
        p("target", "add", "h")
        p("serial", "add", "console", "-t", "h", "--device", boards[name].device)
    _captures_apart(a, b, boards)
    listed = {p: p("daemons", "--json").json() for p in (a, b)}
    assert [(d["name"], d["pid"]) for d in listed[a]] == [("serial-h", _status(a)["pid"])]
    assert [(d["name"], d["pid"]) for d in listed[b]] == [("serial-h", _status(b)["pid"])]
    assert a.state != b.state and (a.state / "serial" / "h" / "console.log").exists()
    assert not (tmp_path / "state" / "serial").exists(), "nothing of either lab under the bare target name"
    a("daemons", "stop", "--all")
    assert _status(b)["capturing"] is True, "`daemons stop --all` in one lab stopped the other's capture"


def test_two_labs_on_one_ssh_host_keep_their_captures_of_h_apart(tmp_path, boards):
    """The issue's case: one user's home on the control host, two operators' labs reaching it over SSH."""
    a, b = _two_labs(tmp_path)
    server = Sshd(tmp_path / "sshd", tmp_path / "home", env={"PANIO_STATE_DIR": str(tmp_path / "host-state")})
    try:
        for name, p in (("a", a), ("b", b)):
            p("init")
            p("host", "add", "bench", "--ssh", f"{server.user}@127.0.0.1", "--port", str(server.port),
              "--python", sys.executable)
            p("host", "trust", "bench")
            p("target", "add", "h", "--host", "bench")
            p("serial", "add", "console", "-t", "h", "--device", boards[name].device)
        _captures_apart(a, b, boards)
        labs = sorted(d.name for d in (tmp_path / "host-state" / "labs").iterdir())
        assert labs == sorted([a.lab_key, b.lab_key])  # the host keeps each lab's h under that lab's key
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["file", "redis"])
def test_a_lease_on_h_in_one_lab_does_not_block_the_others_h(tmp_path, kind, prefix):
    from bench_agent.leases import file_store as file_leases
    from bench_agent.leases import redis_store as redis_leases

    a, b = _two_labs(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    for p in (a, b):
        p("init")
        p("target", "add", "h")
        p("action", "add", "flash", "-t", "h", "--command", f"touch {marks / p.lab_key}")
    if kind == "redis":
        for p in (a, b):
            p.env.update(PANIO_REDIS_URL=SHARED_REDIS, PANIO_REDIS_PREFIX=prefix)
        store = redis_leases.RedisLeaseStore(SHARED_REDIS, prefix).for_lab(a.lab_key)
    else:  # an embedded `panio job run`'s lease in lab a
        store = file_leases.FileLeaseStore(a.state / "leases")
    lease = store.try_acquire("h", {"holder": "job runner of lab a", "job": 5}, ttl_s=30)
    try:
        r = a.fails("action", "run", "h", "flash", code=8)
        assert r.error["holder"] == "job runner of lab a"
        b("action", "run", "h", "flash")  # lab b's h is another target
        assert sorted(m.name for m in marks.iterdir()) == [b.lab_key]
        assert [le["target"] for le in a("lease", "list", "--json").json()] == ["h"]
        assert b("lease", "list", "--json").json() == []
        # a request that names no lab (an older controller, a hand-made one) is bound by every lab's lease
        reply = agent_call(a.env, "action.run", {"target": "h", "name": "flash", "command": f"touch {marks / 'x'}"})
        assert reply["error"]["error"] == "busy" and "job runner of lab a" in reply["error"]["message"], reply
        assert not (marks / "x").exists()
    finally:
        lease.release()


def test_a_capture_from_before_labs_were_keyed_is_listed_and_stopped_by_a_lab(tmp_path, boards):
    """Migration: a capture started with the bare state directory (an older panio) is still found and stopped."""
    a, _ = _two_labs(tmp_path)
    a("init")
    a("target", "add", "h")
    a("serial", "add", "console", "-t", "h", "--device", boards["a"].device)
    code = ("import json, sys; from bench_agent import ops; "
            "print(json.dumps(ops.call('serial.watch', json.loads(sys.argv[1]))))")
    old = subprocess.run([sys.executable, "-P", "-c", code,
                          json.dumps({"target": "h", "interfaces": [{"name": "console", "device": boards["a"].device}]})],
                         env=a.env, capture_output=True, text=True, timeout=60, check=True)
    pid = json.loads(old.stdout)["pid"]
    assert (tmp_path / "state" / "daemons" / "serial-h.json").exists()  # where an older panio kept it
    listed = a("daemons", "--json").json()
    assert [(d["name"], d["pid"], d.get("legacy")) for d in listed] == [("legacy-serial-h", pid, True)]
    assert "started before panio kept state per lab" in a("daemons").out
    r = a("serial", "stop", "h")
    assert f"pid {pid}" in r.out and "before panio kept captures per lab" in r.out
    assert pid not in supervisor_pids(tmp_path / "state")
    a("serial", "watch", "h")
    assert _status(a)["epoch"] == 1  # this lab's own first capture, not the old one's next epoch


def test_two_lab_files_that_share_a_lab_name_share_their_captures(tmp_path, boards):
    """A `[lab] name` keys the lab, not the file's path: copies of one lab (one per operator) see one capture."""
    a, b = _two_labs(tmp_path)
    for p in (a, b):
        p("init")
        p.lab.write_text('[lab]\nname = "bench-room"\n' + p.lab.read_text())
        p("target", "add", "h")
        p("serial", "add", "console", "-t", "h", "--device", boards["a"].device)
    a("serial", "watch", "h")
    assert b("serial", "watch", "h", "--json").json()["already_running"] is True
    assert (tmp_path / "state" / "labs" / "bench-room" / "serial" / "h").is_dir()
    bad = tmp_path / "bad"
    bad.mkdir()
    c = Panio(bad)
    c("init")
    c.lab.write_text('[lab]\nname = "Bench Room"\n' + c.lab.read_text())
    r = c.fails("target", "list", code=5)
    assert "lab.name = 'Bench Room' must be lowercase letters" in r.err and r.error["line"] == 2


def test_a_lab_key_that_is_not_a_name_is_refused_before_any_path_is_made(tmp_path):
    """The key names a directory on the host: a request cannot point it elsewhere."""
    a, _ = _two_labs(tmp_path)
    for bad in ("../../etc", "A", "x/y", ""):
        reply = agent_call(a.env, "serial.status", {"target": "h", "lab_key": bad,
                                                    "iface": {"name": "console", "device": "/dev/null"}})
        assert reply["error"]["error"] == "usage" and "bad lab key" in reply["error"]["message"], reply
    assert not (tmp_path / "state" / "labs").exists() and not (tmp_path / "etc").exists()


LONG = "[[steps]]\nname = 'long'\nrun = 'ping ${target} --count 600 --interval 0.05'\n"
QUICK = "lease_wait_s = 1\n[[steps]]\nname = 'quick'\nrun = 'ping ${target} --count 1'\n"


def test_jobs_of_two_labs_on_one_worker_each_lease_their_own_t1(panio, tmp_path):
    """A worker serves jobs from two lab files (two directories, no shared `[lab] name`): each job leases its
    own lab's t1 (the payload names the lab), so lab b's job runs while lab a's holds a's t1."""
    import shutil

    from jobhelp import job_file, wait_for
    from peerhelp import Workers, drop_keys, worker_lab

    (tmp_path / "w").mkdir()
    workers = Workers(tmp_path / "w", SHARED_REDIS)
    worker_lab(panio, workers)
    workers.start("h1")
    (tmp_path / "b").mkdir()
    other = Panio(tmp_path / "b")
    other.env = {**panio.env, "PANIO_LAB": str(other.lab)}
    shutil.copy(workers.lab, other.lab)  # the same hosts and targets: the worker checks them against its own
    try:
        long = panio("job", "submit", job_file(tmp_path, LONG, "long.toml"), "--target", "t1", "--json").json()
        wait_for(lambda: [le for le in panio("lease", "list", "--json").json() if le["target"] == "t1"], 60)
        r = other("job", "run", job_file(tmp_path, QUICK, "quick.toml"), "--target", "t1", "--json", timeout=120)
        assert r.json()["result"] == "passed", r.out  # before: busy, a's lease on t1 held b's job back
        assert [le["job"] for le in panio("lease", "list", "--json").json()] == [long["job_id"]]
        assert other("lease", "list", "--json").json() == []
        panio("job", "cancel", str(long["job_id"]))
    finally:
        workers.stop_all()
        drop_keys(SHARED_REDIS, workers.env["PANIO_REDIS_PREFIX"])


def test_a_network_port_one_lab_captures_is_busy_for_the_other(tmp_path):
    """A `socket://` port is one port whichever lab names it: no lock says so across the network, so the
    capture of another lab is found by its discovery file and the second capture is refused naming it."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(server.accept()[0]) for _ in range(4)], daemon=True).start()
    url = f"socket://127.0.0.1:{server.getsockname()[1]}"
    a, b = _two_labs(tmp_path)
    try:
        for p in (a, b):
            p("init")
            p("target", "add", "h")
            p("serial", "add", "console", "-t", "h", "--device", url)
        pid = a("serial", "watch", "h", "--json").json()["pid"]
        r = b.fails("serial", "watch", "h", code=8)
        assert str(pid) in r.err and url in r.err, r.err
    finally:
        for pid in supervisor_pids(tmp_path / "state"):
            kill_and_reap(pid)
        server.close()
        for conn in held:
            conn.close()
