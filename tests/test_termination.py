"""A panio command that is terminated (SIGTERM, as an MCP server or CI runner does) takes its hooks with it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from conftest import PANIO


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_sigterm_during_a_hook_stops_the_hook_and_exits_143(panio, tmp_path):
    pidfile = tmp_path / "hook.pid"
    hook = tmp_path / "slow-plug"
    hook.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    hook.chmod(0o755)
    panio("init")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--cycle-cmd", str(hook), "--timeout-s", "120")
    proc = subprocess.Popen([PANIO, "power-cycle", "pico"], env=panio.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline, "the hook never started"
            time.sleep(0.05)
        hook_pid = int(pidfile.read_text())
        assert _alive(hook_pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143
        assert "Traceback" not in proc.stderr.read()
        deadline = time.monotonic() + 10
        while _alive(hook_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(hook_pid), "the hook outlived panio"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
