"""One contract, every transport: the same call gives the same result or the same typed error.

Parametrized over the roads a Dispatcher can take to a host: ``local``
(in-process), ``stub`` (the StubTransport the package ships, running the real
operation), ``ssh`` (a real OpenSSH sshd on loopback and the bench agent
behind it) and ``celery`` (a real ``panio worker`` process on the real Redis).
Every host side shares one state directory, so a serial capture started over
one road is the same supervisor whichever road reads it. The far end is the
simulated board's console on a real PTY; hooks and actions are real commands.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bench_agent.errors import Busy, HookFailed, NotConfigured, Refused, Timeout, UsageError
from bench_agent.leases.file_store import FileLeaseStore
from bench_agent.sim.console import SimConsole
from conftest import PANIO
from controller.dispatch import Dispatcher
from controller.lab.model import Lab
from jobhelp import wait_for
import keyhelp
from serial_fixtures import kill_and_reap, supervisor_pids
from sshd import Sshd

ROADS = ("local", "stub", "ssh", "celery")
REDIS_URL = "redis://127.0.0.1:6379/7"
PROMPT = "root@sim:~# "


class Shared:
    """What every road's host side shares: one state dir, one home, and the processes started for them."""

    def __init__(self, root: Path) -> None:
        self.root, self.state, self.home = root, root / "state", root / "home"
        self.home.mkdir(parents=True)
        self.prefix = f"panio-contract-{uuid.uuid4().hex[:8]}:"
        self.env = {"PANIO_STATE_DIR": str(self.state), "HOME": str(self.home), "PANIO_BROKER": REDIS_URL,
                    "PANIO_REDIS_PREFIX": self.prefix, "PANIO_RESULTS_URL": f"sqlite:///{root / 'results.db'}",
                    **keyhelp.controller_env()}
        self.sshd: Sshd | None = None
        self.worker: subprocess.Popen | None = None
        self.host_lab, self.host_targets = root / "host-lab.toml", {}

    def configure_host(self, hosts: dict, targets: dict) -> None:
        """Add ``targets`` to the Celery host's own lab file: its worker takes hooks and devices from there."""
        import tomlkit

        self.host_targets.update(targets)
        tmp = self.host_lab.with_suffix(".tmp")
        tmp.write_text(tomlkit.dumps({"hosts": hosts, "targets": self.host_targets}))
        tmp.replace(self.host_lab)

    def start_sshd(self) -> Sshd:
        if self.sshd is None:
            self.sshd = Sshd(self.root / "sshd", self.home)
        return self.sshd

    def python_wrapper(self) -> str:
        """The host's python: the agent sees the shared state dir (sshd gives it the login environment)."""
        path = self.root / "host-python"
        path.write_text(f"#!/bin/sh\nexport PANIO_STATE_DIR={self.state} HOME={self.home}\n"
                        f"exec {sys.executable} \"$@\"\n")
        path.chmod(0o755)
        return str(path)

    def start_worker(self) -> None:
        if self.worker is not None:
            return
        log = self.root / "worker.log"
        self.configure_host({}, {})
        self.worker = subprocess.Popen([PANIO, "worker", "--host", "cel", "--lab", str(self.host_lab),
                                        "--concurrency", "2"], env={**os.environ, **self.env, **keyhelp.worker_env()},
                                       stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: "ready." in log.read_text() or self.worker.poll() is not None, timeout_s=60)
        assert self.worker.poll() is None, log.read_text()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.terminate()
            try:
                self.worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait(timeout=5)
        if self.sshd is not None:
            self.sshd.stop()
        for pid in supervisor_pids(self.state):
            kill_and_reap(pid)
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{self.prefix}*"):
            client.delete(key)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    s = Shared(tmp_path_factory.mktemp("contract"))
    yield s
    s.close()


class Road:
    """A Dispatcher over one transport to a lab whose targets live on that road's host."""

    def __init__(self, name: str, shared: Shared) -> None:
        self.name, self.shared = name, shared
        self.host = {"local": None, "stub": None, "ssh": "bench", "celery": "cel"}[name]
        self.hosts: dict = {}
        if name == "ssh":
            sshd = shared.start_sshd()
            self.hosts["bench"] = {"ssh": f"{sshd.user}@127.0.0.1", "port": sshd.port,
                                   "python": shared.python_wrapper()}
            _trust(self.hosts["bench"])
        elif name == "celery":
            shared.start_worker()
            self.hosts["cel"] = {"ssh": "ops@cel.invalid", "transport": "celery"}
        self.leases = FileLeaseStore(shared.state / "leases")
        self.dispatchers: list[Dispatcher] = []

    def lab(self, targets: dict) -> Dispatcher:
        for config in targets.values():
            if self.host:
                config["host"] = self.host
        lab = Lab(Path("lab.toml"), {"targets": targets, "hosts": self.hosts})
        if self.name == "celery":  # the host's own configuration must say the same
            self.shared.configure_host(self.hosts, targets)
        transport = None
        if self.name == "stub":
            from controller.transports.stub import StubTransport

            transport = StubTransport()
        d = Dispatcher(lab, transport=transport, leases=self.leases)
        self.dispatchers.append(d)
        return d

    def close(self) -> None:
        for d in self.dispatchers:
            d.close()


def _trust(host: dict) -> None:
    from controller.transports.known_hosts import record_host_key, scan_host_key

    record_host_key(host, scan_host_key("bench", host))


@pytest.fixture(params=ROADS)
def road(request, shared, monkeypatch):
    for key, value in shared.env.items():
        monkeypatch.setenv(key, value)
    r = Road(request.param, shared)
    yield r
    r.close()


def _name(road: Road, what: str) -> str:
    return f"{what}-{road.name}-{uuid.uuid4().hex[:4]}"


# --- system -------------------------------------------------------------------------------------


def test_ping_info_and_an_unknown_operation(road):
    target = _name(road, "sys")
    d = road.lab({target: {}})
    assert d.call(target, "system.ping", {"payload": [1, "a", None]}) == {"pong": [1, "a", None]}
    info = d.call(target, "system.info", {})
    assert set(info) == {"hostname", "pid", "python"}
    with pytest.raises(UsageError, match="unknown operation 'nosuch.op'"):
        d.call(target, "nosuch.op", {})


def test_the_far_side_checks_the_spec_too(road):
    """A request that skips the dispatcher (an old controller, a hand-written client) is checked where it runs."""
    d = road.lab({"x": {}})
    transport = d.transport_for(road.host)
    with pytest.raises(UsageError, match="timeout_s must be from 0.001 to 86400 s"):
        transport.call({"op": "action.run", "args": {"target": "x", "name": "a", "command": "true",
                                                     "timeout_s": -1}, "deadline_s": None})


# --- actions and power hooks: results, typed errors, deadlines -----------------------------------


def test_action_result_failure_and_deadline(road):
    target = _name(road, "act")
    hello, slow = "sh -c 'echo out; echo err >&2; exit 3'", "sleep 30"
    d = road.lab({target: {"actions": {"hello": {"command": hello}, "slow": {"command": slow}}}})
    r = d.call(target, "action.run", {"target": target, "name": "hello", "command": hello})
    assert (r["exit"], r["stdout"], r["stderr"]) == (3, "out\n", "err\n")
    started = time.monotonic()
    with pytest.raises(Timeout) as info:
        d.call(target, "action.run", {"target": target, "name": "slow", "command": slow, "timeout_s": 1})
    assert time.monotonic() - started < 10
    assert info.value.details["outcome"] == "unknown"  # a side effect that timed out


def test_power_hooks_switch_read_and_fail_typed(road, tmp_path):
    target = _name(road, "pwr")
    state = tmp_path / "state"
    power = {"on_cmd": f"sh -c 'echo on > {state}'", "off_cmd": f"sh -c 'echo off > {state}'",
             "state_cmd": f"cat {state}", "cycle_off_s": 0.1, "timeout_s": 5,
             "levels": {"hard": {"off_cmd": "sh -c 'echo relay gone >&2; exit 5'"}}}
    d = road.lab({target: {"power": power}})
    call = lambda op, **kw: d.call(target, op, {"target": target, "power": power, **kw})  # noqa: E731
    assert call("power.on")["via"] == ["on_cmd"]
    assert call("power.state")["state"] == "on"
    assert call("power.cycle") == {"target": target, "level": None, "action": "cycle", "via": ["off_cmd", "on_cmd"],
                                   "off_s": 0.1}
    with pytest.raises(HookFailed, match="relay gone"):
        call("power.off", level="hard")
    with pytest.raises(NotConfigured, match="no on_cmd for power"):
        call("power.on", level="hard")
    with pytest.raises(NotConfigured, match="no power level 'soft'"):
        call("power.state", level="soft")


# --- leases: side effects refused naming the holder, reads allowed ---------------------------------


def test_a_leased_target_refuses_side_effects_and_serves_reads(road, tmp_path):
    target = _name(road, "lease")
    power = {"on_cmd": f"touch {tmp_path / 'on'}", "state_cmd": "echo off"}
    iface = {"name": "console", "device": str(tmp_path / "no-such-tty")}
    d = road.lab({target: {"power": power, "serial": [iface], "actions": {"a": {"command": "true"}}}})
    lease = road.leases.try_acquire(target, {"holder": "ci-runner@bench:9", "job": 41}, 30)
    try:
        for op, args in [("power.on", {"power": power}), ("action.run", {"name": "a", "command": "true"}),
                         ("serial.send", {"iface": iface, "text": "x"}), ("serial.reset", {"iface": iface}),
                         ("serial.watch", {"interfaces": [iface]})]:
            with pytest.raises(Busy) as info:
                d.call(target, op, {"target": target, **args})
            assert info.value.details["holder"] == "ci-runner@bench:9", op
        assert not (tmp_path / "on").exists()
        assert d.call(target, "power.state", {"target": target, "power": power})["state"] == "off"
        assert d.call(target, "serial.log", {"target": target, "iface": iface})["lines"] == []
        assert d.call(target, "serial.status", {"target": target, "iface": iface})["process"]["state"] == "not_running"
        d.call(target, "system.ping", {"payload": 1})
    finally:
        lease.release()
    d.call(target, "power.on", {"target": target, "power": power})
    assert (tmp_path / "on").exists()


# --- serial against the simulated board ---------------------------------------------------------------


@pytest.fixture
def board(tmp_path):
    sim = SimConsole(str(tmp_path / "tty"), boot_s=0.1, countdown_s=0.2, powered=False, banner="contract board")
    sim.start()
    yield sim
    sim.close()


def test_serial_capture_input_and_reads(road, board, shared):
    target = _name(road, "ser")
    iface = {"name": "console", "device": board.device}
    d = road.lab({target: {"serial": [iface]}})
    call = lambda op, **kw: d.call(target, op, {"target": target, "iface": iface, **kw})  # noqa: E731
    watch = d.call(target, "serial.watch", {"target": target, "interfaces": [iface]})
    try:
        assert watch["already_running"] is False and watch["interfaces"] == ["console"]
        board.power_on()
        booted = call("serial.wait", epoch=watch["epoch"], since=0, pattern=PROMPT, timeout_ms=10000)
        assert booted["status"] == "matched" and "Hit any key" in booted["text"]
        reply = call("serial.transact", text="echo contract", until=PROMPT, timeout_ms=5000)
        assert reply["status"] == "matched" and "contract\r\n" in reply["text"]
        status = call("serial.status")
        assert status["process"]["state"] == "running" and status["epoch"] == watch["epoch"]
        sent = call("serial.send", text="uname -a")
        assert sent["interface"] == "console"
        more = call("serial.wait", epoch=watch["epoch"], since=status["rx"]["cursor"], pattern="GNU/Linux",
                    timeout_ms=5000)
        assert more["status"] == "matched"
        timed_out = call("serial.wait", epoch=watch["epoch"], since=more["cursor"], pattern="never", timeout_ms=300)
        assert timed_out["status"] == "timeout"  # a result, not an error: the bytes and the cursor come back
        lines = [line.get("text") for line in call("serial.log", tail=20)["lines"]]
        assert "contract" in lines and any(t and t.startswith("Linux sim") for t in lines)
        evidence = call("serial.evidence", max_bytes=4096)
        assert evidence["capturing"] is True and evidence["epoch"] == watch["epoch"] and evidence["records"]
        with pytest.raises(Refused, match="not wired to a power button"):
            call("serial.reset")
        with pytest.raises(UsageError, match="at least 3000"):
            call("serial.dtr", ms=100)
        with pytest.raises(NotConfigured, match="no power_sense_signal"):
            call("serial.sense")
    finally:
        stopped = d.call(target, "serial.stop", {"target": target})
    assert stopped["epoch"] == watch["epoch"]
    assert call("serial.log", tail=1)["running"] is False  # the log stays on disk


def test_daemons_list_and_stop_on_the_host(road, board):
    target = _name(road, "dmn")
    iface = {"name": "console", "device": board.device}
    d = road.lab({target: {"serial": [iface]}})
    d.call(target, "serial.watch", {"target": target, "interfaces": [iface]})
    rows = d.call_host(road.host, "daemons.list", {})
    assert f"serial-{target}" in [r["name"] for r in rows]
    stopped = d.call_host(road.host, "daemons.stop", {"names": [f"serial-{target}"]})
    assert [r["name"] for r in stopped] == [f"serial-{target}"]
    assert f"serial-{target}" not in [r["name"] for r in d.call_host(road.host, "daemons.list", {})]


# --- the Celery transport waits the operation's own deadline ---------------------------------------------


def test_celery_waits_the_operations_deadline_not_a_fixed_minute(shared, monkeypatch, tmp_path):
    """With a 1.5 s margin, the old wait (timeout_s + margin) gave up on both calls below at 1.5 s."""
    road = Road("celery", shared)
    for key, value in shared.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PANIO_OP_WAIT_S", "1.5")
    power = {"off_cmd": "sleep 3", "timeout_s": 6}
    d = road.lab({"slow": {"power": power, "actions": {"build": {"command": "sleep 3"}}}})
    started = time.monotonic()
    r = d.call("slow", "action.run", {"target": "slow", "name": "build", "command": "sleep 3"})  # no timeout_s: 600
    assert r["exit"] == 0 and time.monotonic() - started >= 3
    assert d.call("slow", "power.off", {"target": "slow", "power": power})["via"] == ["off_cmd"]
    road.close()


# --- every runtime command: the lease refuses its side effects and serves its reads -------------------

COMMANDS = [  # (argv after the target is substituted, the operation it reaches)
    (["serial", "watch", "pico"], "serial.watch"), (["serial", "stop", "pico"], "serial.stop"),
    (["serial", "send", "pico", "x"], "serial.send"),
    (["serial", "transact", "pico", "x", "--until", "y", "--timeout-ms", "100"], "serial.transact"),
    (["serial", "reset", "pico"], "serial.reset"), (["serial", "dtr", "pico", "--ms", "3000"], "serial.dtr"),
    (["serial", "connect", "pico"], "serial.connect"),
    (["power", "on", "pico"], "power.on"), (["power", "off", "pico"], "power.off"),
    (["power-cycle", "pico"], "power.cycle"), (["action", "run", "pico", "flash"], "action.run"),
    (["serial", "log", "pico"], "serial.log"), (["serial", "status", "pico"], "serial.status"),
    (["serial", "evidence", "pico"], "serial.evidence"),
    (["serial", "wait", "pico", "--epoch", "1", "--since", "0", "--timeout-ms", "100"], "serial.wait"),
    (["power-state", "pico"], "power.state"), (["ping", "pico"], "system.ping"),
]


@pytest.mark.parametrize("argv,op", COMMANDS, ids=[" ".join(a[:2]) for a, _ in COMMANDS])
def test_every_command_is_refused_or_served_while_leased_as_its_spec_says(panio, tmp_path, argv, op):
    from bench_agent import ops

    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", str(tmp_path / "tty"), "--power-button")
    panio("power", "set", "-t", "pico", "--on-cmd", f"touch {tmp_path / 'ran'}", "--off-cmd",
          f"touch {tmp_path / 'ran'}", "--state-cmd", "echo off")
    panio("action", "add", "flash", "-t", "pico", "--command", f"touch {tmp_path / 'ran'}")
    lease = FileLeaseStore(panio.state / "leases").try_acquire("pico", {"holder": "job@ci:1", "job": 5}, 30)
    try:
        r = panio(*argv, check=False)
    finally:
        lease.release()
    if ops.spec(op).side_effect:
        assert r.code == 8 and r.error["holder"] == "job@ci:1" and "leased by job@ci:1" in r.err, r.err
        assert not (tmp_path / "ran").exists()
    else:
        assert r.code != 8, r.err
