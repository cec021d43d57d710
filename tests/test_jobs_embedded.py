"""Jobs on the embedded default: real `panio job run` processes, real step subprocesses, SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import PANIO
from jobhelp import drop_pg_schema, fixture_lab, job_file, pg_schema, stop, wait_for

SMOKE = """
name = "smoke"
target = "pico"
[[steps]]
name = "agent answers"
run = "panio ping ${target} --count 2"
expect_output = "seq=2"
capture = { rtt = 'seq=1 time=(\\S+)' }
[[steps]]
name = "uses capture"
run = "panio ping ${target} --count 1"
expect_output = 'time=\\S+ ms'
reject_output = "^${rtt} never appears alone$"
[[steps]]
name = "show"
run = "target show ${target} --json"
expect_output = '"name": "pico"'
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def results(request, panio):
    if request.param == "postgresql":
        url = pg_schema()
        panio.env["PANIO_RESULTS_URL"] = url
        yield url
        drop_pg_schema(url)
    else:
        yield "sqlite"


def test_passing_job_records_results_and_junit(panio, tmp_path, results):
    fixture_lab(panio)
    junit = tmp_path / "out" / "junit.xml"
    r = panio("job", "run", job_file(tmp_path, SMOKE), "--junit", str(junit))
    assert "job 1 on pico: started" in r.out and "complete, passed" in r.out
    job = panio("job", "status", "1", "--json").json()
    assert (job["health"], job["result"], job["state"]) == ("complete", "passed", "done")
    assert [s["status"] for s in job["steps"]] == ["pass", "pass", "pass"]
    assert job["steps"][0]["captured"]["rtt"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == ["agent answers", "uses capture", "show"]
    logs = panio("job", "logs", "1", "--step", "1").out
    assert "seq=2" in logs and "panio ping pico --count 2" in logs
    arts = {a["name"] for a in panio("job", "artifacts", "1", "--json").json()}
    assert arts == {"step-01.log", "step-02.log", "step-03.log", "junit.xml"}
    panio("job", "artifacts", "1", "--out", str(tmp_path / "arts"))
    assert "seq=2" in (tmp_path / "arts" / "step-01.log").read_text()
    assert ET.parse(tmp_path / "arts" / "junit.xml").getroot().find("testsuite").get("tests") == "3"
    assert panio("job", "list", "--json").json()[0]["id"] == 1


def test_captured_variable_reaches_a_later_step(panio, tmp_path, results):
    fixture_lab(panio)
    body = """
target = "pico"
[[steps]]
run = "target list --json"
capture = { other = '"name": "(qemu)"' }
[[steps]]
run = "target show ${other}"
expect_output = "tags: sim"
"""
    panio("job", "run", job_file(tmp_path, body))
    steps = panio("job", "status", "1", "--json").json()["steps"]
    assert steps[1]["command"] == "panio target show qemu"


def test_a_step_that_changes_the_target_acts_under_the_jobs_own_lease(panio, tmp_path):
    fixture_lab(panio)
    panio("power", "set", "-t", "pico", "--cycle-cmd", "true")
    body = 'target = "pico"\n[[steps]]\nrun = "power-cycle ${target}"\nexpect_output = "pico: power-cycled"\n'
    panio("job", "run", job_file(tmp_path, body))  # was refused as busy: the job's lease, not presented
    assert panio("job", "status", "1", "--json").json()["steps"][0]["status"] == "pass"


def test_board_failure_exits_test_failed_and_skips_the_rest(panio, tmp_path):
    fixture_lab(panio)
    body = """
target = "pico"
[[steps]]
name = "boot banner"
run = "panio target show ${target}"
expect_output = "Linux version"
[[steps]]
name = "never runs"
run = "panio ping ${target}"
"""
    junit = tmp_path / "j.xml"
    r = panio.fails("job", "run", job_file(tmp_path, body), "--junit", str(junit), code=14)
    assert r.error["error"] == "test_failed" and "boot banner" in r.error["message"]
    job = panio("job", "status", "1", "--json").json()
    assert (job["health"], job["result"]) == ("complete", "failed")
    assert [s["status"] for s in job["steps"]] == ["fail", "skipped"]
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert cases[0].find("failure") is not None and cases[1].find("skipped") is not None


def test_continue_on_failure_runs_later_steps(panio, tmp_path):
    fixture_lab(panio)
    body = """
target = "pico"
[[steps]]
run = "panio target show ${target}"
expect_exit = 1
continue_on_failure = true
[[steps]]
run = "panio ping ${target}"
"""
    panio.fails("job", "run", job_file(tmp_path, body), code=14)
    assert [s["status"] for s in panio("job", "status", "1", "--json").json()["steps"]] == ["fail", "pass"]


def test_step_timeout_kills_the_step_and_exits_22(panio, tmp_path):
    fixture_lab(panio)
    body = """
target = "pico"
[[steps]]
name = "slow"
run = "panio ping ${target} --count 100 --interval 0.2"
timeout_s = 1
"""
    r = panio.fails("job", "run", job_file(tmp_path, body), code=22)
    assert "outcome is unknown" in r.error["message"]
    job = panio("job", "status", "1", "--json").json()
    assert job["health"] == "timed_out" and job["steps"][0]["status"] == "timeout"
    assert job["steps"][0]["duration_s"] < 5


def test_lab_failure_is_incomplete_not_a_test_failure(panio, tmp_path):
    fixture_lab(panio)
    body = """
target = "far"
[[steps]]
run = "panio ping ${target}"
"""
    r = panio.fails("job", "run", job_file(tmp_path, body), code=4)  # bench9's SSH port is closed
    assert "incomplete (the lab failed)" in r.error["message"] and r.error["error"] == "unreachable"
    job = panio("job", "status", "1", "--json").json()
    assert (job["health"], job["result"], job["steps"][0]["status"]) == ("incomplete", None, "error")


@pytest.mark.parametrize("body, code, needle", [
    ("target = 'pico'\n[[steps]]\nrun = 'ping pico'\nexpect_exit == 0\n", 5, "job.toml:4:14: not valid TOML"),
    ("target = 'pico'\n[[steps]]\nrun = 'ping pico'\nexpect_outptu = 'x'\n", 5, "job.toml:4:1: unknown key 'expect_outptu'"),
    ("target = 'pico'\n[[steps]]\nrun = 'panio flash pico'\n", 5, "unknown panio command 'flash'"),
    ("target = 'pico'\n[[steps]]\nrun = 'ping pico --count x'\n", 5, "is not a whole number"),
    ("target = 'pico'\n[[steps]]\nrun = 'ping ${kernel}'\n", 5, "${kernel} is not captured"),
    ("target = 'pico'\n[[steps]]\nrun = 'ping pico'\nexpect_output = '(unclosed'\n", 5, "invalid regular expression"),
    ("target = 'pico'\n[[steps]]\nrun = 'job run x.toml'\n", 5, "cannot run inside a job"),
    ("target = 'nosuch'\n[[steps]]\nrun = 'ping pico'\n", 5, "job.toml:1:1: no target 'nosuch'"),
    ("target = 'pico'\nsteps = []\n", 5, "at least one"),
])
def test_bad_job_files_are_rejected_before_anything_runs(panio, tmp_path, body, code, needle):
    fixture_lab(panio)
    path = job_file(tmp_path, body)
    before = (tmp_path / "job.toml").read_text()
    for verb in ("run", "check"):
        r = panio.fails("job", verb, path, code=code)
        assert needle in r.err, r.err
    assert panio("job", "list", "--json").json() == []
    assert (tmp_path / "job.toml").read_text() == before


def test_unknown_target_override_is_not_configured(panio, tmp_path):
    fixture_lab(panio)
    panio.fails("job", "run", job_file(tmp_path, SMOKE), "--target", "ghost", code=3)
    assert panio("job", "list", "--json").json() == []


def test_tag_selector_picks_a_matching_target(panio, tmp_path):
    fixture_lab(panio)
    body = "tags = ['sim']\n[[steps]]\nrun = 'ping ${target}'\nexpect_output = 'qemu'\n"
    panio("job", "run", job_file(tmp_path, body))
    assert panio("job", "status", "1", "--json").json()["target"] == "qemu"


def _start_long_job(panio, tmp_path, name="long.toml"):
    body = "target = 'pico'\nlease_wait_s = 1\n[[steps]]\nrun = 'ping ${target} --count 300 --interval 0.1'\n"
    return subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, body, name)], env=panio.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_lease_refuses_interactive_commands_and_other_jobs_then_cancel(panio, tmp_path):
    fixture_lab(panio)
    proc = _start_long_job(panio, tmp_path)
    try:
        held = wait_for(lambda: panio("lease", "list", "--json").json())
        assert held[0]["target"] == "pico" and held[0]["job"] == 1
        panio("power", "set", "-t", "pico", "--off-cmd", "true")
        r = panio.fails("power", "off", "pico", code=8)  # a side effect
        assert "leased by panio job run@" in r.err and r.error["job"] == 1
        panio("ping", "pico")  # a read passes while leased
        panio("power", "set", "-t", "qemu", "--off-cmd", "true")
        panio("power", "off", "qemu")  # other targets are free
        r = panio.fails("job", "run", str(tmp_path / "long.toml"), code=8)
        assert "lease not obtained" in r.error["message"]
        panio.fails("lease", "break", "pico", code=13)  # a local lease ends only with its holder
        panio("job", "cancel", "1")
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 15, err
    finally:
        stop(proc)
    assert panio("job", "status", "1", "--json").json()["health"] == "canceled"
    assert panio("lease", "list", "--json").json() == []
    panio("ping", "pico")


def test_a_killed_job_run_frees_the_target_and_is_marked_incomplete(panio, tmp_path):
    fixture_lab(panio)
    proc = _start_long_job(panio, tmp_path)
    try:
        wait_for(lambda: panio("lease", "list", "--json").json())
        proc.kill()
        proc.wait(timeout=10)
    finally:
        stop(proc)
    job = panio("job", "status", "1", "--json").json()
    assert (job["state"], job["health"]) == ("done", "incomplete")
    panio("ping", "pico")


def test_live_progress_on_a_terminal(panio, tmp_path):
    import os
    import pty

    fixture_lab(panio)
    master, slave = pty.openpty()
    proc = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, SMOKE)], env=panio.env, stdin=slave,
                            stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        proc.wait(timeout=30)
        os.close(master)
    text = out.decode()
    assert proc.returncode == 0
    assert "\r\x1b[K ..  1/3 agent answers" in text  # the running step's line, redrawn in place
    assert "\r\x1b[Kok   3/3 show" in text and "step 1/3" not in text  # no plain log lines on a terminal


def test_job_timeout_bounds_the_whole_job(panio, tmp_path):
    fixture_lab(panio)
    body = """
target = "pico"
timeout_s = 1.5
[[steps]]
run = "panio ping ${target} --count 5 --interval 0.2"
timeout_s = 30
[[steps]]
run = "panio ping ${target} --count 100 --interval 0.2"
timeout_s = 30
[[steps]]
run = "panio ping ${target}"
"""
    r = panio.fails("job", "run", job_file(tmp_path, body), code=22)
    assert "job timeout" in r.error["message"]
    job = panio("job", "status", "1", "--json").json()
    assert job["health"] == "timed_out"
    assert [s["status"] for s in job["steps"]] == ["pass", "timeout", "skipped"]
    assert job["finished_at"] - job["started_at"] < 4


def test_a_job_file_that_is_not_there_is_a_usage_error(panio):
    panio("init")
    r = panio.fails("job", "run", "no-such-job.toml", code=2)
    assert "no job file at no-such-job.toml" in r.err
    r = panio.fails("suite", "run", "no-such-suite.toml", code=2)
    assert "no suite file" in r.err


def test_a_captured_variable_may_fill_a_choice_or_a_bounded_number(panio, tmp_path):
    """`${var}` gets its value when the step runs (and that panio checks it): the job check must not judge it
    by a stand-in, which a choice (`netif mode`) or a lower bound (`--max-output-bytes` >= 4096) would refuse."""
    fixture_lab(panio)
    body = """target = 'pico'
[[steps]]
run = 'ping ${target} --count 1'
capture = { mode = 'm(o)de', size = '(\\d+) ms' }
[[steps]]
run = 'netif mode ${mode} ${target}'
[[steps]]
run = 'serial wait ${target} --max-output-bytes=${size} --pattern "seen ${mode} here" --timeout-ms 10'
"""
    panio("job", "check", job_file(tmp_path, body))
    for wrong, needle in (("netif mode sideways ${target}", "invalid choice: 'sideways'"),
                          ("serial wait ${target} --max-output-bytes 1 --pattern x", "must be from 4096")):
        r = panio.fails("job", "check", job_file(tmp_path, body.replace(body.splitlines()[-1], f"run = '{wrong}'")),
                        code=5)
        assert needle in r.err, r.err
