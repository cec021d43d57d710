"""Newcomer frictions of issue 23, each fixed and held: a wait with no start, `panio-sim down` leaving captures,
the pytest plugin's screen example, where `video shot` writes, "(1 jobs)"."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import PANIO
from jobhelp import fixture_lab, job_file, wait_for
from bench_agent.sim.console import PROMPT
from serial_fixtures import supervisor_connections
from simbench import sim_bench
from simbench import qemu_missing

DOCS = Path(__file__).resolve().parent.parent / "docs"
STARTS = ("--since-now", "--since-step", "--since-job", "--since-time", "--epoch")


def test_a_wait_with_no_start_hints_a_command_that_runs_and_since_now_waits_for_new_bytes_only(bench, panio):
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    bench.wait_for("pico", PROMPT, timeout_ms=30000)
    panio("serial", "transact", "pico", "echo old-marker", "--until", "old-marker\r\n", "--timeout-ms", "30000")
    r = panio.fails("serial", "wait", "pico", "--pattern", "old-marker", "--timeout-ms", "1000", code=2)
    hint = r.error["hint"]
    pasted = re.search(r"`(panio serial wait pico --since-now[^`]*)`", hint).group(1)
    words = shlex.split(pasted.replace("REGEX", "old-marker"))[1:] + ["--timeout-ms", "1500"]
    late = panio.fails(*words, code=22)  # what arrived before the wait began is not what it waits for
    assert late.error["status"] == "timeout"
    before = supervisor_connections(bench.state, "pico")
    waiting = subprocess.Popen([PANIO, "serial", "wait", "pico", "--since-now", "--pattern", r"new-marker\r\n",
                                "--timeout-ms", "60000"], env=panio.env, stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: supervisor_connections(bench.state, "pico") - before, timeout_s=60, every_s=0.02)
        panio("serial", "send", "pico", "echo new-marker")
        out, _ = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait(10)
    assert waiting.returncode == 0 and '"status": "matched"' in out.replace('":"', '": "')


def test_every_documented_serial_wait_says_where_to_start():
    missing = []
    for page in sorted(DOCS.glob("*.md")) + [DOCS.parent / "README.md"]:
        for line in page.read_text().splitlines():
            command = re.search(r"panio serial wait \S+[^`|#]*", line)
            if command and "--pattern" in command.group(0) and not any(s in command.group(0) for s in STARTS):
                missing.append(f"{page.name}: {command.group(0).strip()}")
    assert missing == []


def _running(panio) -> list[str]:
    return sorted(d["name"] for d in panio("daemons", "--json").json() if d["state"] == "running")


def test_sim_down_stops_the_video_capture_too(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", boards=1, watch=("board0",)) as bench:
        panio("video", "watch", "board0")
        assert _running(panio) == ["serial-board0", "video-board0"]
        down = bench.down()
    assert "serial-board0" in down.stdout and "video-board0" in down.stdout
    assert _running(panio) == []


@pytest.mark.skipif(qemu_missing() is not None, reason=qemu_missing() or "")
def test_sim_down_stops_what_runs_on_the_qemu_netboot_bench(panio, tmp_path):
    """qemu0's serial capture, its video capture and its netboot server outlived `panio-sim down`."""
    with sim_bench(panio, tmp_path / "sim", "--qemu", "--qemu-netboot", boards=0) as bench:
        panio("serial", "watch", "qemu0")
        panio("video", "watch", "qemu0")
        panio("netboot", "start", "qemu0")
        assert _running(panio) == ["netboot-qemu0", "serial-qemu0", "video-qemu0"]
        down = bench.down()
    assert all(name in down.stdout for name in ("netboot-qemu0", "serial-qemu0", "video-qemu0")), down.stdout
    assert _running(panio) == []
    assert panio("netboot", "status", "qemu0", "--json").json()["serving"] is False


def test_one_job_is_one_job_not_1_jobs(panio, tmp_path):
    fixture_lab(panio)
    job_file(tmp_path, "name = 'quick'\n[[steps]]\nrun = 'ping ${target}'\n", "quick.toml")
    one = job_file(tmp_path, "name = 'one'\ntargets = ['pico']\njobs = ['quick.toml']\n", "one.toml")
    two = job_file(tmp_path, "name = 'two'\ntargets = ['pico', 'qemu']\njobs = ['quick.toml']\n", "two.toml")
    assert "(1 job) every 1h" in panio("schedule", "add", "hourly", "--suite", one, "--every", "1h").out
    assert "(2 jobs) every 1h" in panio("schedule", "add", "twice", "--suite", two, "--every", "1h").out
    assert panio("suite", "check", one).out.splitlines()[0].endswith("is valid: 1 job")
    assert "suite one: 1 job\n" in panio("suite", "run", one, timeout=120).out
