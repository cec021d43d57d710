"""A panio command that is terminated (SIGTERM, as an MCP server or CI runner does) takes its hooks with it."""

from __future__ import annotations

import signal
import subprocess

from bench_agent.process import pid_alive
from conftest import PANIO
from jobhelp import wait_for, wait_gone


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
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout_s=60)  # the hook started
        hook_pid = int(pidfile.read_text())
        assert pid_alive(hook_pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        assert "Traceback" not in proc.stderr.read()
        wait_gone(hook_pid, what="the hook outlived panio")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
