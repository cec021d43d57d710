"""Frictions a new user hit (issue 17): a missing capture is the lab's fault, waits need no cursor
bookkeeping, `panio-sim down` leaves nothing of its bench running. Real panio, real PTYs, real processes."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

from conftest import BIN
from jobhelp import job_file, stop, wait_for
from simbench import sim_bench


def test_serial_status_of_a_stopped_capture_exits_10_and_still_prints_its_json(panio, bench):
    bench.board("pico")
    r = panio("serial", "status", "pico", check=False)
    assert r.code == 10 and r.error["error"] == "not_running"
    assert json.loads(r.out)["process"]["state"] == "not_running"
    assert "panio serial watch pico" in r.err
    panio("serial", "watch", "pico")
    assert panio("serial", "status", "pico").json()["process"]["state"] == "running"


def test_a_step_needing_capture_without_one_is_a_lab_failure_naming_the_fix(panio, bench, tmp_path):
    bench.board("pico")
    body = """
target = "pico"
[[steps]]
name = "capture is running"
run = "panio serial status ${target}"
expect_output = '"state": "running"'
"""
    junit = tmp_path / "j.xml"
    r = panio("job", "run", job_file(tmp_path, body), "--junit", str(junit), check=False)
    assert r.code == 10, r.err  # not 14: the board did nothing wrong
    assert r.error["error"] == "not_running"
    job = panio("job", "status", "1", "--json").json()
    assert job["health"] == "incomplete" and job["result"] is None
    assert "serial watch" in job["reason"] or "serial watch" in json.dumps(job["error"])
    case = ET.parse(junit).getroot().find(".//testcase")
    assert case.find("error") is not None and case.find("failure") is None


def test_since_step_waits_from_the_previous_step_without_bookkeeping(panio, bench, tmp_path):
    sims = bench.board("pico")
    sims["console"].power_on()
    # at its shell before the job types: a line typed during the autoboot countdown stops the board in U-Boot
    wait_for(lambda: sims["console"].state == "shell", timeout_s=30, every_s=0.02)
    body = """
target = "pico"
[[steps]]
name = "watch"
run = "panio serial watch ${target}"
[[steps]]
name = "say early"  # until the answer's own line, not the echo of the typed command
run = "panio serial transact ${target} 'echo early-${job_id}' --until '\\nearly-${job_id}\\r?\\n' --timeout-ms 10000"
[[steps]]
name = "something else"
run = "panio ping ${target}"
[[steps]]
name = "not since the step before"
run = "panio serial wait ${target} --since-step --pattern 'early-${job_id}' --timeout-ms 1500"
expect_exit = 22
[[steps]]
name = "but since the job began"
run = "panio serial wait ${target} --since-job --pattern 'early-${job_id}' --timeout-ms 5000"
expect_output = '"status": "matched"'
"""
    r = panio("job", "run", job_file(tmp_path, body), "--json", timeout=120)
    steps = r.json()["steps"]
    assert [s["status"] for s in steps] == ["pass"] * 5, steps
    outside = panio.fails("serial", "wait", "pico", "--since-step", "--pattern", "x", code=2)
    assert "inside a job step" in outside.err
    panio.fails("serial", "wait", "pico", "--pattern", "x", code=2)


def test_sim_with_two_boards_runs_its_bundled_suite_without_a_manual_watch_and_down_stops_the_captures(panio, tmp_path):
    with sim_bench(panio, tmp_path / "sim", boards=2) as bench:
        assert "watch board0" not in bench.up.stdout and "board0, board1" in bench.up.stdout
        r = panio("suite", "run", str(bench.dir / "suite.toml"), "--json", timeout=180)
        jobs = r.json()["jobs"]
        assert sorted(j["target"] for j in jobs) == ["board0", "board1"]
        assert all((j["health"], j["result"]) == ("complete", "passed") for j in jobs), jobs
        running = _captures(panio)
        assert {d["target"] for d in running} == {"board0", "board1"}
        down = bench.down()
    assert "serial-board0" in down.stdout and "serial-board1" in down.stdout
    assert _captures(panio) == []


def _captures(panio) -> list[dict]:
    out = panio("daemons", "--json").json()
    return [d for d in out if d["kind"] == "serial" and d["state"] == "running"]


def test_a_plug_switched_off_mid_job_is_a_lab_failure_not_the_boards(panio, tmp_path):
    body = """
target = "board0"
[[steps]]
run = "panio serial watch ${target}"
[[steps]]
name = "waits for a prompt that never comes"
run = "panio serial wait ${target} --since-step --pattern 'no-such-prompt' --timeout-ms 10000"
"""
    with sim_bench(panio, tmp_path / "sim") as bench:
        proc = subprocess.Popen([str(BIN / "panio"), "job", "run", job_file(tmp_path, body), "--json"], env=panio.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # once the job holds the target, someone pulls the plug behind panio's back (the host refuses
            # `panio power off` while the job leases it); the wait's 10 s leave a slow machine time to do it
            wait_for(lambda: _job_state(panio, 1) in ("running", "done"), 60)
            subprocess.run([str(BIN / "shellyplug"), "-d", bench.boards()[0]["plug"], "off"], env=panio.env,
                           check=True, capture_output=True, timeout=60)
            out, err = proc.communicate(timeout=120)
        finally:
            stop(proc)
    assert proc.returncode == 4, err  # unreachable: the lab failed; not 14
    job = json.loads(out)
    assert job["health"] == "incomplete" and "powered off" in job["reason"], job["reason"]
    step = job["steps"][1]
    assert step["status"] == "error" and any(c["check"] == "lab: power" for c in step["checks"])


def _job_state(panio, job_id: int) -> str | None:
    r = panio("job", "status", str(job_id), "--json", check=False)
    return r.json()["state"] if r.code == 0 else None


def test_the_job_file_format_in_job_help_is_a_valid_job(panio, tmp_path):
    import textwrap

    text = panio("job", "--help").out
    example = textwrap.dedent(text.split("The job file (TOML):\n", 1)[1].split("\nA step is", 1)[0])
    panio("init")
    panio("target", "add", "pico")
    r = panio("job", "check", job_file(tmp_path, example), "--json").json()
    assert [s["name"] for s in r["steps"]] == ["capture", "power-cycle", "boots to a login prompt"]
    assert "--since-step" in r["steps"][2]["argv"]
    assert "--since-step" in panio("skill").out and "panio target health" in panio("skill").out
