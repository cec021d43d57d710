"""panio against Debian's OpenSSH as it ships: long operations, a silent link, the console, changed host keys.

The control host is this machine reached through a real ``sshd`` on loopback; the
host side keeps its own state directory (sshd's SetEnv), as a separate machine
would. The board is a SimConsole on a real PTY.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time

import pytest

from bench_agent.sim.console import UNAME, SimConsole
from conftest import PANIO
from jobhelp import wait_for
from serial_fixtures import kill_and_reap, supervisor_connections, supervisor_pids
from sshd import Sshd

WELCOME = "Welcome to the panio simulated board"


@pytest.fixture
def host_state(tmp_path):
    return tmp_path / "host-state"


@pytest.fixture
def sshd(tmp_path, host_state):
    server = Sshd(tmp_path / "sshd", tmp_path / "home", env={"PANIO_STATE_DIR": str(host_state)})
    yield server
    server.stop()


@pytest.fixture
def board(tmp_path, host_state):
    sim = SimConsole(str(tmp_path / "far-console"), boot_s=0.1, countdown_s=0.2, powered=False)
    sim.start()
    yield sim
    for pid in supervisor_pids(host_state):
        kill_and_reap(pid)
    sim.close()


@pytest.fixture
def remote(panio, sshd, board):
    """A lab whose target ``far`` (its console a simulated board) belongs to host ``bench``, reached over sshd."""
    panio("init")
    panio("host", "add", "bench", "--ssh", f"{sshd.user}@127.0.0.1", "--port", str(sshd.port),
          "--python", sys.executable)
    panio("host", "trust", "bench")
    panio("target", "add", "far", "--host", "bench")
    panio("serial", "add", "console", "-t", "far", "--device", board.device)
    return panio


def test_a_serial_wait_of_55_s_runs_to_its_match_over_openssh(remote, board, host_state):
    remote("serial", "watch", "far")
    assert supervisor_pids(host_state), "the capture supervisor runs on the host side"
    epoch = remote("serial", "status", "far").json()["epoch"]
    # the board says its line only after 55 s: far past the 10 s a probe-less link survived before
    timer = threading.Timer(55, board.power_on)
    timer.start()
    t0 = time.monotonic()
    try:
        r = remote("serial", "wait", "far", "--epoch", str(epoch), "--since", "0", "--pattern", WELCOME,
                   "--timeout-ms", "60000", timeout=90, check=False)
    finally:
        timer.cancel()
    elapsed = time.monotonic() - t0
    assert r.code == 0, r.err
    assert r.json()["status"] == "matched" and WELCOME in r.json()["text"]
    assert 55 <= elapsed < 75, elapsed


def test_a_silent_link_during_a_long_operation_is_unreachable_within_15_s(remote, sshd, host_state):
    remote("serial", "watch", "far")
    epoch = remote("serial", "status", "far").json()["epoch"]
    before = supervisor_connections(host_state, "far")
    proc = subprocess.Popen([PANIO, "serial", "wait", "far", "--epoch", str(epoch), "--since", "0", "--pattern",
                             "never said", "--timeout-ms", "120000"], env=remote.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # the request is with the agent: connected, its agent started, the wait at the capture supervisor
        wait_for(lambda: supervisor_connections(host_state, "far") - before or proc.poll() is not None, 90)
        assert proc.poll() is None
        assert sshd.signal_sessions(signal.SIGSTOP)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        sshd.signal_sessions(signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 4, err
    assert elapsed <= 15, elapsed
    assert json.loads(err.strip().splitlines()[-1])["outcome"] == "unknown"


def _read_until(fd: int, needle: bytes, timeout_s: float) -> bytes:
    seen, end = b"", time.monotonic() + timeout_s
    while needle not in seen:
        left = end - time.monotonic()
        assert left > 0, f"{needle!r} never came; got {seen!r}"
        if select.select([fd], [], [], min(left, 0.5))[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the pty's other end closed
                break
    return seen


def test_serial_connect_over_ssh_is_a_terminal_on_the_board(remote, board):
    board.power_on()
    wait_for(lambda: board.state == "shell", timeout_s=60, every_s=0.05)
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    proc = subprocess.Popen([PANIO, "serial", "connect", "far"], env=remote.env, stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True)
    try:
        _read_until(master, b"Ctrl-] quits", 60)
        os.write(master, b"uname -a\r")  # raw: the CR reaches the board as typed
        assert UNAME.encode() in _read_until(master, UNAME.encode(), 30)
        os.write(master, b"\x1d")
        assert proc.wait(timeout=30) == 0
        assert b"panio: disconnected" in _read_until(master, b"disconnected", 30)
        assert termios.tcgetattr(slave) == before, "the terminal was not restored"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)
    # the port is free again: the host side's operation ended with the console
    assert "\nagain" in remote("serial", "connect", "far", input="echo again\r").out


def test_serial_connect_over_ssh_from_a_pipe_and_a_refusal(remote, board):
    board.power_on()
    # at its shell first: a line piped in while it boots is the boot's to swallow (on a quiet machine, the
    # connection came up before the boot ended and the line was lost to it)
    wait_for(lambda: board.state == "shell", timeout_s=60, every_s=0.05)
    r = remote("serial", "connect", "far", input="uname -a\r", timeout=60)
    assert UNAME in r.out
    remote("serial", "watch", "far")  # the capture now holds the port
    r = remote.fails("serial", "connect", "far", code=8)
    assert "held by" in r.err or "serial capture" in r.err


def test_a_changed_host_key_is_refused_until_replaced_on_purpose(remote, sshd, tmp_path):
    known = tmp_path / "home" / ".config" / "panio" / "known_hosts"
    old_fp = _fingerprint(sshd.root / "host_key.pub")
    assert "is already trusted" in remote("host", "trust", "bench").out
    sshd.new_host_key()  # the host was reinstalled, or someone is in the middle
    new_fp = _fingerprint(sshd.root / "host_key.pub")
    recorded = known.read_text()
    r = remote.fails("ping", "far", code=13)
    assert "CHANGED" in r.err and new_fp in r.err and old_fp in r.err and "--replace" in r.err
    r = remote.fails("host", "trust", "bench", code=13)
    assert new_fp in r.err and old_fp in r.err and "--replace" in r.err
    assert r.error["recorded"] == [f"ssh-ed25519 {old_fp}"] and r.error["key"] == f"ssh-ed25519 {new_fp}"
    remote.fails("host", "trust", "bench", "--replace", "--fingerprint", old_fp, code=13)
    assert known.read_text() == recorded, "a refused trust changed the known_hosts file"
    out = remote("host", "trust", "bench", "--replace", "--fingerprint", new_fp, "--json").json()
    assert out["key"] == f"ssh-ed25519 {new_fp}" and out["replaced"] == [f"ssh-ed25519 {old_fp}"]
    assert len(known.read_text().splitlines()) == 1
    assert remote("ping", "far", "--count", "1", "--json").json()["host"] == "bench"


def test_a_changed_key_in_the_users_own_known_hosts_is_theirs_to_remove(remote, sshd, tmp_path):
    user_known = tmp_path / "home" / ".ssh" / "known_hosts"
    user_known.write_text(f"[127.0.0.1]:{sshd.port} {' '.join(sshd.host_pub.split()[:2])}\n")
    (tmp_path / "home" / ".config" / "panio" / "known_hosts").unlink()
    sshd.new_host_key()
    r = remote.fails("host", "trust", "bench", "--replace", code=13)
    assert str(user_known) in r.err and "ssh-keygen -R" in r.err


def _fingerprint(pub) -> str:
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True,
                          check=True).stdout.split()[1]


def test_a_reply_is_awaited_for_the_deadline_plus_a_margin_then_it_is_a_timeout(remote, monkeypatch):
    from bench_agent.errors import Timeout
    from controller.lab import load
    from controller.transports import ssh

    for key in ("HOME", "PANIO_LAB", "PANIO_STATE_DIR"):
        monkeypatch.setenv(key, remote.env[key])
    monkeypatch.setattr(ssh, "REPLY_MARGIN_S", 1.0)
    remote("serial", "watch", "far")
    lab = load(remote.lab)
    iface = dict(lab.serial("far", None))
    epoch = remote("serial", "status", "far").json()["epoch"]
    transport = ssh.SSHTransport("bench", lab.host("bench"))
    try:
        assert transport.call({"op": "system.ping", "args": {"payload": 1}, "deadline_s": None}) == {"pong": 1}
        wait = {"target": "far", "iface": iface, "epoch": epoch, "since": 0, "pattern": "never said",
                "timeout_ms": 60000, "lab_key": lab.key}  # the lab's capture, as the dispatcher asks
        t0 = time.monotonic()  # connected, its agent running: what follows is the reply's wait alone
        with pytest.raises(Timeout, match="did not answer within its deadline") as err:
            transport.call({"op": "serial.wait", "args": wait, "deadline_s": 1.0})  # the caller's bound: 1 s
        assert 2 <= time.monotonic() - t0 < 30  # deadline + margin, not the wait's own 60 s
        assert err.value.details["outcome"] == "unknown"
        # the late reply never answers the next request: a fresh agent does
        assert transport.call({"op": "system.ping", "args": {"payload": 7}, "deadline_s": None}) == {"pong": 7}
    finally:
        transport.close()


def test_a_console_whose_link_goes_silent_ends_unreachable_with_the_terminal_restored(remote, sshd):
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    proc = subprocess.Popen([PANIO, "serial", "connect", "far"], env=remote.env, stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True)
    try:
        _read_until(master, b"Ctrl-] quits", 60)
        assert sshd.signal_sessions(signal.SIGSTOP)
        t0 = time.monotonic()
        out = _read_until(master, b'"exit": 4', 30)
        assert proc.wait(timeout=30) == 4
        assert time.monotonic() - t0 <= 15
        assert b"link lost" in out
        assert termios.tcgetattr(slave) == before, "the terminal was not restored"
    finally:
        sshd.signal_sessions(signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)


def test_a_long_paste_into_a_board_that_echoes_it_neither_stalls_nor_loses_the_end(remote, board):
    board.power_on()
    wait_for(lambda: board.state == "shell", timeout_s=60, every_s=0.05)
    # ~136 KB in, twice that back: far more than a PTY, an SSH window or a write timeout holds at once
    paste = "".join(f"echo line-{i:06d}-{'x' * 50}\r" for i in range(2000))
    r = remote("serial", "connect", "far", input=paste, timeout=180)
    assert "\nline-001999-" in r.out.replace("\r", "")


def test_a_host_with_a_key_per_type_is_checked_against_the_type_recorded(panio, tmp_path):
    server = Sshd(tmp_path / "sshd2", tmp_path / "home", ecdsa_key=True)
    try:
        panio("init")
        panio("host", "add", "two", "--ssh", f"{server.user}@127.0.0.1", "--port", str(server.port),
              "--python", sys.executable)
        panio("target", "add", "t2", "--host", "two")
        # the user's own ssh recorded the host's ECDSA key; the host offers Ed25519 first
        ecdsa = (server.root / "host_key_ecdsa.pub").read_text().split()[:2]
        (tmp_path / "home" / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{server.port} {' '.join(ecdsa)}\n")
        assert "is already trusted" in panio("host", "trust", "two").out
        assert panio("ping", "t2", "--count", "1", "--json").json()["host"] == "two"
    finally:
        server.stop()


def test_openssh_refuses_the_keepalive_probe_and_the_refusal_counts_as_life(remote, monkeypatch):
    from controller.lab import load
    from controller.transports import ssh

    for key in ("HOME", "PANIO_LAB", "PANIO_STATE_DIR"):
        monkeypatch.setenv(key, remote.env[key])
    transport = ssh.SSHTransport("bench", load(remote.lab).host("bench"))
    try:
        transport.call({"op": "system.ping", "args": {}, "deadline_s": None})
        link = transport._client.get_transport()
        # the cause of the old bug, as Debian's sshd ships: an answer, and it is a refusal (paramiko: None)
        assert link.global_request("keepalive@openssh.com", wait=True) is None and link.is_active()
        transport.liveness.heard_at -= ssh.PROBE_EVERY_S + 5  # nothing heard for a while: the next look probes
        transport.liveness.silent_s()
        end = time.monotonic() + 30
        while transport.liveness.silent_s() > 1 and time.monotonic() < end:
            time.sleep(0.05)
        assert transport.liveness.silent_s() <= 1, "the refusal was not counted as a sign of life"
    finally:
        transport.close()
