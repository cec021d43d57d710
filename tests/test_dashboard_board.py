"""The dashboard's board page and job page over real HTTP and a real results database (issue 44): a board's jobs,
failure rate, last good, health timeline, trend chart and suite runs; a job's definition, its rerun and its serial
log paged and searched. The browser test (test_dashboard_browser.py) looks at them in Chromium."""

from __future__ import annotations

import re
import uuid

import pytest

from conftest import Panio
from dashhelp import Client, DashboardProc
from jobhelp import job_file

OP, READ = "op-" + uuid.uuid4().hex, "rd-" + uuid.uuid4().hex
PASSING = "name = 'smoke'\n# the file as submitted, comments too\n[[steps]]\nname = 'ping it'\n" \
          "run = 'ping ${target} --count 2'\n"
FAILING = "name = 'expects-more'\n[[steps]]\nname = 'wrong'\nrun = 'ping ${target}'\nexpect_output = 'seq=9'\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """pico: a pass, a failure, a suite run of two jobs, and a maintenance spell (a health timeline)."""
    root = tmp_path_factory.mktemp("boardlab")
    (root / "home").mkdir()
    panio = Panio(root)
    panio("init")
    panio("target", "add", "pico", "--tag", "pi5")
    panio("target", "add", "spare")
    panio("job", "run", job_file(root, PASSING, "pass.toml"), "--target", "pico")
    panio("job", "run", job_file(root, FAILING, "fail.toml"), "--target", "pico", check=False)
    job_file(root, "name = 'nightly'\njobs = ['pass.toml', 'fail.toml']\ntargets = ['pico']\n", "suite.toml")
    panio("suite", "run", str(root / "suite.toml"), check=False)
    panio("target", "health", "pico", "--set", "maintenance", "--reason", "reflashing its bootloader")
    panio("target", "health", "pico", "--set", "good", "--no-check")
    return panio


@pytest.fixture(scope="module")
def dashboard(lab, tmp_path_factory):
    env = {**lab.env, "PANIO_DASHBOARD_TOKEN": OP, "PANIO_DASHBOARD_READ_TOKEN": READ}
    d = DashboardProc(env, tmp_path_factory.mktemp("dash") / "dashboard.log")
    yield d
    d.stop()


def signed_in(d: DashboardProc, token: str) -> Client:
    c = Client(d.url)
    status, _, _ = c.post("/login", {"token": token})
    assert status == 303
    return c


def test_a_board_page_shows_its_jobs_rate_last_good_health_trend_and_suite_runs(dashboard):
    c = signed_in(dashboard, READ)
    assert '<a href="/targets/pico">pico</a>' in c.get("/")[2]
    status, _, page = c.get("/targets/pico")
    assert status == 200
    # 4 jobs judged by the board: smoke passed twice, expects-more failed twice
    assert re.search(r'id="failure-rate"><span class="bad">50 %</span> <span class="muted">\(2 of 4', page)
    last_good = re.search(r'id="last-good"><a href="/jobs/(\d+)">', page)
    assert last_good and last_good.group(1) == "3"  # the suite's smoke: the newest pass
    assert len(re.findall(r'<rect class="bar (passed|failed)"', page)) == 4  # one bar a job, in the SVG
    runs = page.split('id="suite-runs"')[1].split("</table>")[0]
    assert runs.count('class="suite-run"') == 1 and "nightly" in runs  # one unit, two jobs
    assert '"/jobs/3"' in runs and '"/jobs/4"' in runs and '"/jobs/1"' not in runs
    assert "1 passed" in runs and "1 failed" in runs and re.search(r"<td>\d+\.\d s</td>", runs)  # its duration
    timeline = page.split('id="health-timeline"')[1].split("</table>")[0]
    assert "reflashing its bootloader" in timeline and timeline.index(">good<") < timeline.index(">maintenance<")
    assert len(re.findall(r'class="job-duration">\d+\.\d s<', page)) == 4
    assert "no job ran on this board" in c.get("/targets/spare")[2]
    assert c.get("/targets/nosuch")[0] == 404 and c.get("/targets/a..b")[0] == 404
