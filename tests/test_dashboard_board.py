"""The dashboard's board page and job page over real HTTP and a real results database (issue 44): a board's jobs,
failure rate, last good, health timeline, trend chart and suite runs; a job's definition, its rerun and its serial
log paged and searched. The browser test (test_dashboard_browser.py) looks at them in Chromium."""

from __future__ import annotations

import re
import uuid

import pytest

from conftest import Panio
from dashhelp import Client, signed_in, tokened
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
    d = tokened(lab.env, tmp_path_factory.mktemp("dash") / "dashboard.log", OP, READ)
    yield d
    d.stop()


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


def _serial_log(store, job_id: int, lines: int = 2500) -> list[str]:
    """A long saved serial window for job ``job_id``: its lines stamped a second apart up to its step's start,
    then at it (as the capture stamps them: local time of day)."""
    import time

    step = store.job(job_id)["steps"][0]
    start = step["started_at"]
    out = []
    for i in range(lines):
        at = start - (lines // 2 - i) * 0.01 if i < lines // 2 else start + (i - lines // 2) * 0.01
        stamp = time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at % 1 * 1000):03d}"
        text = "Kernel panic - not syncing: VFS" if i == 2200 else f"boot line {i}"
        out.append(f"[{stamp}] #{i + 1} {text}")
    store.add_artifact(job_id, "serial-console.log", "\n".join(out) + "\n")
    return out


def test_a_job_page_shows_its_definition_and_its_serial_log_paged_searchable_with_step_anchors(dashboard, lab):
    from bench_agent.results.store import ResultStore

    store = ResultStore(f"sqlite:///{lab.env['PANIO_STATE_DIR']}/results.db")
    _serial_log(store, 1)
    c = signed_in(dashboard, READ)
    page = c.get("/jobs/1")[2]
    assert "# the file as submitted, comments too" in page.split('id="definition"')[1]
    assert 'id="rerun"' not in page  # a reader may not rerun
    assert 'href="/jobs/1/serial?step=1#step-1"' in page
    first = c.get("/jobs/1/serial")[2]
    assert "2500 lines" in first and ">boot line 999<" not in first  # not the whole log at once
    assert 'id="L1"' in first and 'id="L1000"' in first and 'id="L1001"' not in first
    step = c.get("/jobs/1/serial?step=1")[2]  # the page holding step 1's first line (line 1251), anchored
    assert re.search(r'<span class="step-start" id="step-1">.*?</span><span id="L1251">', step)
    assert 'class="step-link" href="?iface=console&amp;page=2#step-1"' in step
    found = c.get("/jobs/1/serial?q=kernel+PANIC")[2]
    hits = found.split('id="serial-hits"')[1].split("</div>")[0]
    assert 'href="?iface=console&amp;page=3#L2201">line 2201</a>' in hits and hits.count("<li>") == 1
    assert "no line holds" in c.get("/jobs/1/serial?q=%3Cscript%3E")[2]
    assert c.get("/jobs/1/serial?page=99")[0] == 200 and c.get("/jobs/1/serial?page=%C2%B2")[0] == 200


def test_an_operator_reruns_a_job_by_a_form_with_its_csrf(dashboard, lab):
    from jobhelp import wait_for

    reader = signed_in(dashboard, READ)
    assert reader.post("/jobs/1/rerun", {"csrf": reader.csrf("/jobs/1")})[0] == 403
    op = signed_in(dashboard, OP)
    assert 'id="rerun"' in op.get("/jobs/1")[2]
    assert op.post("/jobs/1/rerun", {"csrf": "forged"})[0] == 403
    status, headers, _ = op.post("/jobs/1/rerun", {"csrf": op.csrf("/jobs/1")})
    assert status == 303
    new = int(re.match(r"/jobs/(\d+)\?message=rerun%20of%20job%201%20", headers["location"]).group(1))
    assert new > 1
    wait_for(lambda: "complete, passed" in op.get(f"/jobs/{new}")[2], timeout_s=30)
    page = op.get(headers["location"])[2]
    assert "rerun of job 1 on pico" in page and "# the file as submitted, comments too" in page


def test_a_token_in_the_address_is_traded_for_a_session_and_left_out_of_it(dashboard):
    c = Client(dashboard.url)
    status, headers, _ = c.get(f"/login?token={READ}&next=/targets/pico")
    assert status == 303 and headers["location"] == "/targets/pico"  # no token in the address it goes on to
    status, _, page = c.get("/targets/pico")
    assert status == 200 and "signed in: reader" in page
    assert Client(dashboard.url).get("/login?token=not-the-token")[0] == 401
    for elsewhere in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        status, headers, _ = Client(dashboard.url).get(f"/login?token={OP}&next={elsewhere}")
        assert status == 303 and headers["location"] == "/", elsewhere


def test_the_job_list_and_a_job_say_how_long_it_took(dashboard):
    c = signed_in(dashboard, READ)
    assert len(re.findall(r'class="job-duration">\d+\.\d s<', c.get("/jobs?target=pico")[2])) >= 4
    assert re.search(r'took <span id="job-took">\d+\.\d s</span>', c.get("/jobs/1")[2])
