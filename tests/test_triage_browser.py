"""The dashboard's triage page in a real browser (Debian's Chromium, headless, through chromedriver): a job that
passed on a simulated board with its screen captured, the same job failing after a panic line was injected,
and the failed job's page leading to its triage: both log excerpts side by side, the two screenshots. Screenshots
of each page are kept (the test's tmp dir, and $PANIO_TEST_ARTIFACTS when set)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
from dashhelp import DashboardProc
from browserhelp import chromium, needs_chromium
from jobhelp import wait_for
from simbench import sim, sim_bench

TOKEN = "op-" + uuid.uuid4().hex
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs"

pytestmark = needs_chromium


@pytest.fixture
def browser(tmp_path):
    yield from chromium(tmp_path, "1400,1800")


def shot(driver, directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot {name}"
    if os.environ.get("PANIO_TEST_ARTIFACTS"):
        out = Path(os.environ["PANIO_TEST_ARTIFACTS"]) / "dashboard"
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.name)
    return path


def text_of(driver, css: str) -> str:
    found = driver.find_elements("css selector", css)
    return found[0].text if found else ""


def test_the_triage_page_shows_both_runs_side_by_side_with_their_screens(panio, tmp_path, browser):
    with sim_bench(panio, tmp_path / "sim", booted=True, watch=("board0",), video=("board0",)) as bench:
        boot = (bench.dir / "boot.toml").read_text().replace(
            'reject_output = "Kernel panic"', 'reject_output = "Kernel panic"\nscreenshot = true')
        job = tmp_path / "boot.toml"
        job.write_text(boot)
        passed = panio("job", "run", str(job), "--target", "board0", "--json", timeout=120).json()["id"]
        sim("inject", "board0", "--dir", str(bench.dir), "--boot-line", PANIC, env=panio.env)
        failed = panio.fails("job", "run", str(job), "--target", "board0", code=14).error["job"]
        names = {a["name"] for a in panio("job", "artifacts", str(passed), "--json").json()}
        assert "step-03.png" in names  # the pass kept its screen at that step too

        panio.env["PANIO_DASHBOARD_TOKEN"] = TOKEN
        dashboard = DashboardProc(panio.env, tmp_path / "dashboard.log")
        shots = tmp_path / "screenshots"
        try:
            browser.get(dashboard.url + f"/jobs/{failed}")
            browser.find_element("id", "token").send_keys(TOKEN)
            browser.find_element("id", "sign-in").click()
            wait_for(lambda: "signed in: operator" in text_of(browser, "header"), timeout_s=20)
            browser.get(dashboard.url + f"/jobs/{failed}")
            wait_for(lambda: browser.find_elements("id", "triage-link"), timeout_s=20)
            shot(browser, shots, "11-failed-job")
            browser.find_element("id", "triage-link").click()
            wait_for(lambda: "Triage of job" in browser.page_source, timeout_s=20)

            assert PANIC in text_of(browser, "#triage-summary")
            assert f"job #{passed}" in text_of(browser, "#baseline")
            assert "boots to a shell: pass" in text_of(browser, "#divergent-step")
            serial = next(s for s in browser.find_elements("css selector", "section.log")
                          if "serial-console.log" in s.text)
            failing = serial.find_element("css selector", "pre.failing")
            passing = serial.find_element("css selector", "pre.passing")
            marked = failing.find_element("css selector", ".mark").text
            assert marked.endswith(PANIC)
            assert "Run /sbin/init" in passing.find_element("css selector", ".mark").text
            # side by side: the two excerpts start at the same height, the failing one on the left
            assert failing.location["y"] == passing.location["y"] and failing.location["x"] < passing.location["x"]

            wait_for(lambda: browser.execute_script(
                "return ['shot-failing', 'shot-passing'].every(id => {"
                " const i = document.getElementById(id); return i && i.complete && i.naturalWidth > 0; });"),
                timeout_s=20)
            assert text_of(browser, "#shots-differ") in ("they differ", "the same")
            shot(browser, shots, "12-triage")
            browser.execute_script("document.getElementById('shot-failing').scrollIntoView();")
            shot(browser, shots, "13-triage-screenshots")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\ndashboard log:\n{dashboard.log.read_text()}") from exc
        finally:
            dashboard.stop()
    for name in ("11-failed-job", "12-triage", "13-triage-screenshots"):
        assert (shots / f"{name}.png").read_bytes().startswith(b"\x89PNG")
