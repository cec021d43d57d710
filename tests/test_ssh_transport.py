"""The SSH transport against a real sshd on loopback: host keys, a kept agent channel, a silent link."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import PANIO
from jobhelp import job_file
from sshd import Sshd


@pytest.fixture
def sshd(tmp_path):
    server = Sshd(tmp_path / "sshd", tmp_path / "home")
    yield server
    server.stop()


@pytest.fixture
def remote(panio, sshd):
    panio("init")
    panio("host", "add", "bench", "--ssh", f"{sshd.user}@127.0.0.1", "--port", str(sshd.port),
          "--python", sys.executable)
    panio("target", "add", "far", "--host", "bench")
    return panio


def test_unknown_host_key_is_refused_until_trusted(remote, sshd):
    r = remote.fails("ping", "far", code=13)
    assert "unknown host key" in r.err and "panio host trust bench" in r.err
    remote.fails("host", "trust", "bench", "--fingerprint", "SHA256:not-it", code=13)
    expected = subprocess.run(["ssh-keygen", "-lf", str(sshd.root / "host_key.pub")], capture_output=True,
                              text=True, check=True).stdout.split()[1]
    out = remote("host", "trust", "bench", "--fingerprint", expected, "--json").json()
    assert out["key"].endswith(expected)
    r = remote("ping", "far", "--count", "3", "--json").json()
    assert r["host"] == "bench" and len(r["times_ms"]) == 3


def test_a_changed_host_key_is_refused(remote, sshd, tmp_path):
    remote("host", "trust", "bench")
    known = (tmp_path / "home" / ".config" / "panio" / "known_hosts")
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    name, key = other.with_suffix(".pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{sshd.port} {name} {key}\n")
    r = remote.fails("ping", "far", code=13)
    assert "CHANGED" in r.err


def test_one_kept_connection_and_agent_per_process(remote, sshd, monkeypatch):
    remote("host", "trust", "bench")
    for key in ("HOME", "PANIO_LAB", "PANIO_STATE_DIR"):
        monkeypatch.setenv(key, remote.env[key])
    from bench_agent.errors import UsageError
    from controller.dispatch import Dispatcher
    from controller.lab import load

    with Dispatcher(load(remote.lab)) as dispatcher:
        pids = {dispatcher.call("far", "system.info", {})["pid"] for _ in range(5)}
        start = time.perf_counter()
        for i in range(50):
            assert dispatcher.call("far", "system.ping", {"payload": i}) == {"pong": i}
        per_call_ms = (time.perf_counter() - start) * 1000 / 50
        assert len(pids) == 1 and pids != {os.getpid()}
        assert per_call_ms < 20, f"{per_call_ms:.1f} ms a round trip: not a kept channel"
        assert len(sshd.sessions()) >= 1
        with pytest.raises(UsageError, match="unknown operation"):
            dispatcher.call("far", "nosuch.op", {})


def test_a_silent_link_fails_as_unreachable_within_15_s(remote, sshd):
    remote("host", "trust", "bench")
    proc = subprocess.Popen([PANIO, "ping", "far", "--count", "1000", "--interval", "0.05"], env=remote.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "seq=1 " in proc.stdout.readline()
        stopped = sshd.signal_sessions(signal.SIGSTOP)
        assert stopped
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 4, err
    assert elapsed <= 15, elapsed
    assert "outcome of the operation is unknown" in err


def test_a_job_step_reaches_a_remote_target_over_ssh(remote, tmp_path):
    remote("host", "trust", "bench")
    body = "target = 'far'\n[[steps]]\nrun = 'ping ${target} --count 2'\nexpect_output = 'far \\(bench\\): seq=2'\n"
    remote("job", "run", job_file(tmp_path, body))
    assert remote("job", "status", "1", "--json").json()["result"] == "passed"


def test_an_unreachable_host_makes_the_job_incomplete_with_exit_4(remote, sshd, tmp_path):
    remote("host", "set", "bench", "--port", str(sshd.port + 1 if sshd.port < 65535 else 1))
    body = "target = 'far'\n[[steps]]\nrun = 'ping ${target}'\n"
    r = remote.fails("job", "run", job_file(tmp_path, body), code=4)
    assert "incomplete" in r.err


def test_discover_configure_and_doctor_reach_a_remote_host(remote, sshd, tmp_path):
    import tomllib

    remote("host", "trust", "bench")
    inv = remote("discover", "--host", "bench", "--json").json()
    assert set(inv) == {"serial", "video", "hid", "usb", "network", "adb"}
    proposal = remote("configure", "far2", "--host", "bench").out
    assert tomllib.loads(proposal)["targets"]["far2"]["host"] == "bench"
    # doctor runs on the host that owns the target: a device present there, and one that is not
    master, slave = os.openpty()
    try:
        remote("serial", "add", "console", "-t", "far", "--device", os.ttyname(slave))
        remote("serial", "add", "bmc", "-t", "far", "--device", str(tmp_path / "no-such-tty"))
        rows = {r["item"]: r["status"] for r in remote("doctor", "far", "--json", check=False).json()["targets"]["far"]}
        assert rows == {"console": "ok", "bmc": "missing"}
    finally:
        os.close(master)
        os.close(slave)
