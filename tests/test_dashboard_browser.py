"""The dashboard in a real browser: Debian's Chromium, headless, driven by Selenium through chromedriver.

An operator signs in with the token, watches a running job on a simulated board update in place, opens
its serial log, and cancels it. Screenshots of each page are kept as test artifacts (the test's tmp dir,
and $PANIO_TEST_ARTIFACTS when set)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import PANIO
from dashhelp import DashboardProc
from browserhelp import chromium, needs_chromium
from jobhelp import job_file, wait_for

TOKEN = "op-" + uuid.uuid4().hex
MARKER = "dash-" + uuid.uuid4().hex[:8]
JOB = f"""name = "live"
[[steps]]
name = "say hello"
run = "panio serial transact ${{target}} 'echo {MARKER}' --until 'root@sim:~# ' --timeout-ms 10000"
expect_output = "{MARKER}"
[[steps]]
name = "slow ping"
run = "panio ping ${{target}} --count 6 --interval 0.5"
[[steps]]
name = "long ping"
run = "panio ping ${{target}} --count 2000 --interval 0.05"
[[steps]]
name = "never reached"
run = "panio ping ${{target}}"
"""

pytestmark = needs_chromium


@pytest.fixture
def browser(tmp_path):
    yield from chromium(tmp_path, "1280,1000")


class Shots:
    """Screenshots under the test's tmp dir, copied to $PANIO_TEST_ARTIFACTS when it is set."""

    def __init__(self, driver, directory: Path) -> None:
        self.driver, self.directory = driver, directory
        directory.mkdir(parents=True, exist_ok=True)

    def take(self, name: str) -> Path:
        path = self.directory / f"{name}.png"
        assert self.driver.save_screenshot(str(path)), f"no screenshot {name}"
        if os.environ.get("PANIO_TEST_ARTIFACTS"):
            out = Path(os.environ["PANIO_TEST_ARTIFACTS"]) / "dashboard"
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, out / path.name)
        return path


def text_of(driver, css: str) -> str:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return driver.find_element("css selector", css).text
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def test_operator_watches_a_running_job_opens_its_serial_log_and_cancels_it(panio, sim_bench, browser,
                                                                             tmp_path):
    # sim_bench: board0 at its shell before its capture started (a keystroke in the countdown stops at U-Boot)
    panio.env["PANIO_DASHBOARD_TOKEN"] = TOKEN
    dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
    shots = Shots(browser, tmp_path / "screenshots")
    job = subprocess.Popen([PANIO, "job", "run", job_file(tmp_path, JOB), "--target", "board0"], env=panio.env,
                           stdout=open(tmp_path / "job.out", "w"), stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        browser.get(dashboard.url + "/jobs")
        assert browser.current_url.endswith("/login")
        browser.find_element("id", "token").send_keys("not the token")
        browser.find_element("id", "sign-in").click()
        wait_for(lambda: "wrong token" in text_of(browser, "#login-error"), timeout_s=10)  # the next page loaded
        browser.find_element("id", "token").send_keys(TOKEN)
        browser.find_element("id", "sign-in").click()
        wait_for(lambda: "Control hosts" in browser.page_source, timeout_s=10)
        assert "signed in: operator" in text_of(browser, "header")
        wait_for(lambda: "#1 live board0 running" in text_of(browser, "#queue-live"), timeout_s=30)  # polled in
        shots.take("01-overview")

        browser.get(dashboard.url + "/jobs/1")
        wait_for(lambda: "running" in text_of(browser, "#verdict"), timeout_s=30)
        browser.execute_script("window.loadedOnce = 'yes';")  # gone if the page reloads: updates must come in place
        # the steps turn green one after another on the open page, without a reload
        # (one poll's rows are written one after another: read them together once step 3 runs)
        wait_for(lambda: [_step_status(browser, i) for i in (1, 2, 3)] == ["pass", "pass", "running"],
                 timeout_s=40)
        assert browser.execute_script("return window.loadedOnce;") == "yes"
        shots.take("02-job-running")

        browser.find_element("id", "serial-link").click()
        wait_for(lambda: f"echo {MARKER}" in text_of(browser, "#serial-console"), timeout_s=20)
        assert "live: lines since the job took its lease" in browser.page_source
        shots.take("03-serial-log")

        browser.back()
        wait_for(lambda: browser.find_elements("id", "cancel"), timeout_s=10)
        browser.find_element("id", "cancel").click()
        wait_for(lambda: "cancel requested" in text_of(browser, "#message"), timeout_s=10)
        wait_for(lambda: "canceled" in text_of(browser, "#verdict").replace("cancel requested", ""), timeout_s=40)
        assert not browser.find_elements("id", "cancel")  # a finished job offers no cancel
        assert _step_status(browser, 4) == "skipped"
        shots.take("04-job-canceled")
        assert job.wait(timeout=30) == 15, (tmp_path / "job.out").read_text()

        browser.find_element("id", "serial-link").click()  # now the saved window, not the live one
        wait_for(lambda: MARKER in text_of(browser, "#serial-console"), timeout_s=10)
        assert "as saved when it ended" in browser.page_source
    except AssertionError as exc:
        raise AssertionError(f"{exc}\njob output:\n{(tmp_path / 'job.out').read_text()}\n"
                             f"dashboard log:\n{dashboard.log.read_text()}") from exc
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=10)
        dashboard.stop()
    for name in ("01-overview", "02-job-running", "03-serial-log", "04-job-canceled"):
        assert (tmp_path / "screenshots" / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def _step_status(driver, n: int) -> str:
    rows = driver.find_elements("css selector", "tr.step")
    try:
        return rows[n - 1].find_element("css selector", ".step-status").text if len(rows) >= n else ""
    except Exception:  # noqa: BLE001 - the row was swapped out while read: ask again
        return ""


BOARD_JOB = """name = "console-check"
[[steps]]
name = "say hello"
run = "panio serial transact ${{target}} 'echo {word}' --until 'root@sim:~# ' --timeout-ms 10000"
expect_output = "{word}"
[[steps]]
name = "waits for the banner"
run = "panio serial wait ${{target}} --since-step --pattern '{pattern}' --timeout-ms 1500"
"""


def test_an_operator_signs_in_by_address_and_reads_a_board_a_job_its_log_and_its_triage(panio, sim_bench, browser,
                                                                                          tmp_path):
    """The operator's morning: a board's page (rate, last good, trend, suite runs), a job's definition and its
    serial log searched, the triage of the failure headed by the board's last words. Screenshots kept (and
    scripts/dashboard_screenshots.py puts them in docs/img/)."""
    good = job_file(tmp_path, BOARD_JOB.format(word=MARKER, pattern="root@sim"), "good.toml")
    bad = job_file(tmp_path, BOARD_JOB.format(word=MARKER, pattern="never-comes-xyz"), "bad.toml")
    job_file(tmp_path, "name = 'nightly'\njobs = ['good.toml', 'good.toml']\ntargets = ['board0']\n", "suite.toml")
    for path in (good, good):
        subprocess.run([PANIO, "job", "run", path, "--target", "board0"], env=panio.env, check=True,
                       capture_output=True, timeout=120)
    subprocess.run([PANIO, "suite", "run", str(tmp_path / "suite.toml")], env=panio.env, check=True,
                   capture_output=True, timeout=120)
    failed = subprocess.run([PANIO, "job", "run", bad, "--target", "board0"], env=panio.env, capture_output=True,
                            timeout=120)
    assert failed.returncode == 14, failed.stderr
    panio.env["PANIO_DASHBOARD_TOKEN"] = TOKEN
    dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
    shots = Shots(browser, tmp_path / "screenshots")
    try:
        browser.get(f"{dashboard.url}/login?token={TOKEN}&next=/targets/board0")  # no form to fill
        wait_for(lambda: "Board board0" in browser.page_source, timeout_s=10)
        assert browser.current_url == f"{dashboard.url}/targets/board0" and TOKEN not in browser.current_url
        assert "signed in: operator" in text_of(browser, "header")
        assert "20 %" in text_of(browser, "#failure-rate") and "#4" in text_of(browser, "#last-good")
        assert len(browser.find_elements("css selector", "#trend svg rect.bar")) == 5
        assert "nightly" in text_of(browser, "#suite-runs") and "2 passed" in text_of(browser, "#suite-runs")
        shots.take("board")

        browser.get(f"{dashboard.url}/jobs/5")
        browser.find_element("css selector", "#definition summary").click()
        wait_for(lambda: "never-comes-xyz" in text_of(browser, "#job-file"), timeout_s=10)
        assert browser.find_elements("id", "rerun")
        shots.take("job-definition")

        browser.find_element("css selector", "a.step-anchor").click()  # step 1's place in the serial log
        wait_for(lambda: browser.current_url.endswith("#step-1"), timeout_s=10)
        assert f"echo {MARKER}" in text_of(browser, "#serial-console")
        browser.find_element("id", "serial-q").send_keys(MARKER)
        browser.find_element("id", "serial-search-go").click()
        wait_for(lambda: "lines hold" in text_of(browser, "#serial-hits"), timeout_s=10)
        shots.take("serial-search")

        browser.get(f"{dashboard.url}/jobs/5/triage")
        wait_for(lambda: "the board's last words" in text_of(browser, "#triage-summary"), timeout_s=10)
        assert "status: timeout" not in text_of(browser, "#triage-summary")
        assert "root@sim" in text_of(browser, "#last-words")
        shots.take("triage-last-words")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ndashboard log:\n{dashboard.log.read_text()}") from exc
    finally:
        dashboard.stop()
    for name in ("board", "job-definition", "serial-search", "triage-last-words"):
        assert (tmp_path / "screenshots" / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def test_a_bisections_page_in_the_browser_shows_the_range_shrinking(panio, browser, tmp_path):
    """A finished bisection of eight builds (b06 the first bad one): reached from the nav, its bar drawn (five good
    builds, three bad), one row a probe with the range after it, the bad build's failure; a probe's job page
    links back. Screenshot kept (scripts/dashboard_screenshots.py puts it in docs/img/)."""
    from bisecthelp import bisect, deploy_actions

    panio("init")
    panio("target", "add", "pico")
    deploy_actions(panio, "pico")
    done = bisect(panio, tmp_path, "pico")
    panio.env["PANIO_DASHBOARD_TOKEN"] = TOKEN
    dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
    shots = Shots(browser, tmp_path / "screenshots")
    try:
        browser.get(f"{dashboard.url}/login?token={TOKEN}&next=/")
        wait_for(lambda: "signed in: operator" in text_of(browser, "header"), timeout_s=10)
        browser.find_element("id", "nav-bisects").click()
        wait_for(lambda: "b06" in text_of(browser, "#bisects"), timeout_s=10)
        browser.find_element("css selector", f'#bisects a[href="/bisects/{done["id"]}"]').click()
        wait_for(lambda: "First bad build: b06" in text_of(browser, "#first-bad"), timeout_s=10)
        spans = browser.find_elements("css selector", "#range-bar rect.span")
        assert [s.get_attribute("class") for s in spans] == ["span good", "span bad"]
        assert float(spans[0].get_attribute("width")) == 450.0  # five of eight builds, of 720 px
        rows = browser.find_elements("css selector", "#probes tr.probe")
        assert len(rows) == len(done["probes"]) and "b05..b06, 0 between" in rows[-1].text
        assert "BUG: oops at <hex>" in text_of(browser, "#failure")
        shots.take("bisect")
        rows[2].find_element("css selector", "a[href^='/jobs/']").click()
        wait_for(lambda: f"bisection #{done['id']}" in text_of(browser, "#bisect-link"), timeout_s=10)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ndashboard log:\n{dashboard.log.read_text()}") from exc
    finally:
        dashboard.stop()
    assert (tmp_path / "screenshots" / "bisect.png").read_bytes().startswith(b"\x89PNG")
