"""What a new user hit, each fixed and held: docs that disagreed with behaviour, reports that said `None`,
an unfilled `${target}`, a progress line that froze on a quiet step, the license table setuptools warns about."""

from __future__ import annotations

import io
import re
import subprocess
import time
import tomllib
from pathlib import Path

from conftest import BIN
from jobhelp import job_file

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FAILING = ("name = 'f'\n[[steps]]\nname = 'wrong'\nrun = 'ping ${target}'\nexpect_output = 'seq=9'\n"
           "[[steps]]\nname = 'after'\nrun = 'ping ${target} --count 2'\n")
LAB_FAILS = ("name = 'g'\n[[steps]]\nname = 'no console'\nrun = 'serial log ${target}'\n"
             "[[steps]]\nname = 'after'\nrun = 'ping ${target}'\n")


def documented_exit(page: str, row_start: str) -> int:
    row = next(ln for ln in (DOCS / page).read_text().splitlines() if ln.startswith(f"| {row_start}"))
    return int(re.search(r"\| (\d+) `", row).group(1))


def test_a_missing_job_file_exits_as_the_docs_say(panio):
    panio("init")
    panio.fails("job", "run", "no-such-job.toml", code=documented_exit("jobs.md", "job or suite file missing"))


def test_doctor_failing_prints_the_two_error_lines_and_keeps_its_report(panio):
    panio("init")
    panio("target", "add", "pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/ttyUSB-absent")
    r = panio.fails("doctor", code=1)
    assert "MISSING" in r.out and "/dev/ttyUSB-absent" in r.out
    assert r.error["items"] == ["pico/serial/console"] and "missing or wrong" in r.error["message"]
    assert panio.fails("doctor", "--json", code=1).json()["ok"] is False


def test_getting_started_leads_to_the_simulator():
    text = (DOCS / "getting-started.md").read_text()
    assert "panio-sim up" in text and "(simulator.md)" in text and "boot.toml" in text


def test_simulator_docs_list_every_file_up_writes(panio, tmp_path):
    sim_dir = tmp_path / "sim"
    sim = str(BIN / "panio-sim")
    subprocess.run([sim, "up", "--dir", str(sim_dir), "--boards", "2", "--boot-s", "0.1", "--countdown-s", "0.1"],
                   env=panio.env, check=True, capture_output=True, timeout=60)
    try:
        written = {re.sub(r"board\d+", "boardN", p.name) for p in sim_dir.iterdir()}
    finally:
        subprocess.run([sim, "down", "--dir", str(sim_dir)], env=panio.env, capture_output=True, timeout=60)
    table = (DOCS / "simulator.md").read_text()
    assert written >= {"lab.toml", "sim.pids", "boardN.tty", "boot.toml"}
    assert [name for name in sorted(written) if f"| `{name}` |" not in table] == []


def test_the_live_progress_line_ticks_through_a_quiet_step():
    from controller.jobs.progress import LiveProgress

    out = io.StringIO()
    show = LiveProgress(out, tick_s=0.1)
    show("step_start", {"idx": 0, "name": "wait for login", "command": "panio serial wait", "count": 1})
    time.sleep(0.75)  # the step prints nothing
    show("step_end", {"idx": 0, "status": "pass", "duration_s": 0.75})
    frames = out.getvalue().split("\r\x1b[K")
    elapsed = [float(m.group(1)) for f in frames if (m := re.search(r"wait for login +(\d+\.\d)s", f))]
    assert len(elapsed) >= 4 and elapsed[-1] >= 0.5, frames
    settled = out.getvalue()
    time.sleep(0.3)
    assert out.getvalue() == settled  # nothing ticks after the step ended


def test_reports_name_what_a_check_saw_and_fill_skipped_steps(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    r = panio("job", "run", job_file(tmp_path, FAILING), "--target", "pico", "--junit", str(tmp_path / "f.xml"),
              check=False)
    assert r.code == 14
    assert "got None" not in r.out and "None" not in r.out
    assert "output matches /seq=9/: no match in the output (last output line: 'pico (local): seq=1" in r.out
    assert "skip 2. after  (panio ping pico --count 2)" in r.out
    status = panio("job", "status", "1", "--json").json()
    assert status["steps"][1]["command"] == "panio ping pico --count 2"


def test_junit_of_a_job_the_lab_stopped_has_no_none(panio, tmp_path):
    panio("init")
    panio("target", "add", "pico")
    junit = tmp_path / "g.xml"
    panio("job", "run", job_file(tmp_path, LAB_FAILS), "--target", "pico", "--junit", str(junit), check=False)
    xml = junit.read_text()
    assert 'name="panio.job.health" value="incomplete"' in xml
    assert "None" not in xml and "${target}" not in xml


def test_the_license_is_an_spdx_string():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"  # a table makes setuptools warn on every install
    assert "setuptools>=77" in project["build-system"]["requires"]  # the first that reads the SPDX string
