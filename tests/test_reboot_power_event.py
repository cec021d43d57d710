"""A plug switched off for a moment between two power reads (issue 44 item 4): the power reads miss it, but the
job's own serial log shows the board booting again though no step asked and the board announced no reboot. That
is the lab's power event (incomplete, exit 4), not the board's failure (complete, failed, exit 14)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

from conftest import PANIO
from jobhelp import job_file, stop, wait_for

from bench_agent.triage import reboots

JOB = """name = "waits"
[[steps]]
name = "waits for what never comes"
run = "panio serial wait ${target} --since-now --pattern never-comes-xyz --timeout-ms 8000"
timeout_s = 30
"""


def test_boots_in_a_log_are_counted_and_an_announced_one_is_the_boards():
    log = ["root@sim:~# ", "U-Boot 2024.01-sim", "DRAM: 512 MiB", "Starting kernel ...",
           "[    0.0] Booting Linux on physical CPU 0x0", "buildroot login: "]
    assert [b["line"] for b in reboots.boots(log)] == [1]  # U-Boot then its kernel: one boot
    assert reboots.unasked(log)["text"] == "U-Boot 2024.01-sim" and reboots.unasked(log, expected=1) is None
    panic = ["Kernel panic - not syncing: VFS", "Rebooting in 1 seconds..", "U-Boot 2024.01-sim"]
    assert reboots.boots(panic)[0]["own"] and reboots.unasked(panic) is None  # the board's own: its failure
    twice = log + ["U-Boot 2024.01-sim", "Starting kernel ..."]
    assert [b["line"] for b in reboots.boots(twice)] == [1, 6] and reboots.unasked(twice, expected=1)["line"] == 6


def test_a_reboot_in_the_serial_log_is_the_labs_power_event(panio, sim_bench, tmp_path):
    plug = sim_bench.boards()[0]["plug"]

    def switch(on: bool) -> None:
        with urllib.request.urlopen(f"http://{plug}/rpc/Switch.Set?id=0&on={str(on).lower()}", timeout=10) as r:
            assert r.status == 200

    results = Path(panio.env["PANIO_STATE_DIR"]) / "results.db"

    def running() -> bool:
        from bench_agent.errors import NotConfigured
        from bench_agent.results.store import ResultStore

        if not results.exists():
            return False
        try:
            steps = ResultStore(f"sqlite:///{results}").job(1)["steps"]
        except NotConfigured:
            return False
        return bool(steps) and steps[0]["status"] == "running"

    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, JOB), "--target", "board0", "--json"],
                            env=panio.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: running() or proc.poll() is not None, 60, 0.05)
        assert proc.poll() is None, proc.communicate()
        switch(False)  # off for a moment (two HTTP requests apart): no power read lands in it
        switch(True)
        out, err = proc.communicate(timeout=90)
    finally:
        stop(proc)
    job = json.loads(out)
    assert proc.returncode == 4, (job.get("reason"), err)  # the lab failed: not 14 (the board)
    assert job["health"] == "incomplete" and "booted again during the step" in job["reason"], job["reason"]
    assert any(c["check"] == "lab: power" for c in job["steps"][0]["checks"])
