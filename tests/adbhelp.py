"""Debian's adb server on a private port, and simulated Android devices (bench_agent/sim/android.py) for it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ADB = shutil.which("adb")
needs_adb = pytest.mark.skipif(ADB is None, reason="Debian's adb is not installed (scripts/system-deps.sh installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def adb_server():
    """A real adb server on a port of its own (ANDROID_ADB_SERVER_PORT for every adb child); killed after."""
    port = free_port()
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}
    subprocess.run([ADB, "-P", str(port), "start-server"], env=env, check=True, capture_output=True, timeout=30)
    try:
        yield port
    finally:
        subprocess.run([ADB, "-P", str(port), "kill-server"], env=env, capture_output=True, timeout=30)


@contextlib.contextmanager
def android(directory: Path, name: str = "tablet0", size: str = "1080x1920", *extra: str):
    """One simulated Android device process; yields its ready record (serial, port, state_dir, pid)."""
    directory.mkdir(parents=True, exist_ok=True)
    ready = directory / f"{name}.json"
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-P", "-m", "bench_agent.sim.android", "--dir", str(directory),
                             "--name", name, "--size", size, "--boot-s", "0.5", *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None, "the simulated Android device exited at start"
            assert time.monotonic() < deadline, "the simulated Android device did not get ready"
            time.sleep(0.02)
        yield json.loads(ready.read_text())
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def events(device: dict) -> list[dict]:
    path = Path(device["state_dir"]) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(check, timeout_s: float = 20, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
