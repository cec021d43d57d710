"""The bundled suite on the simulated bench: what `make demo` runs, and the CI exit codes it gives."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def test_bundled_suite_passes_on_the_simulated_bench(panio, sim_bench, tmp_path):
    junit, report = tmp_path / "junit.xml", tmp_path / "report.md"
    r = panio("suite", "run", str(sim_bench.dir / "suite.toml"), "--junit", str(junit), "--report", str(report),
              timeout=120)
    assert "complete, passed" in r.out
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == ["capture is running", "power-cycle", "boots to a shell",
                                              "console answers uname -a", "reports power on"]
    assert not any(c.find("failure") is not None or c.find("error") is not None for c in cases)
    text = report.read_text()
    assert "Linux sim" in text
    # the boot step's `serial wait` reply reads as the console's lines, not as JSON with a base64 copy
    assert "data_b64" not in text and '"text":' not in text and "\nU-Boot 2024.01-sim" in text
    assert "status: matched" in text
    log = panio("serial", "log", "board0", "--tail", "400").out
    # capture started after the first boot's banner, so a banner in the log is the power-cycle's boot
    assert log.index("U-Boot 2024.01-sim") < log.index("Linux sim 6.1.0-sim")


def test_a_board_that_fails_a_check_is_exit_14_not_a_lab_failure(panio, sim_bench, tmp_path):
    job = (sim_bench.dir / "boot.toml").read_text().replace('expect_output = "Linux"', 'expect_output = "FreeBSD"')
    (tmp_path / "bad.toml").write_text(job)
    junit = tmp_path / "junit.xml"
    r = panio("job", "run", str(tmp_path / "bad.toml"), "--target", "board0", "--junit", str(junit), check=False,
              timeout=120)
    assert r.code == 14, r.err
    assert r.error["error"] == "test_failed"
    failed = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None]
    assert failed == ["console answers uname -a"]


def test_the_serial_log_of_the_jobs_window_is_an_artifact(panio, sim_bench, tmp_path):
    panio("serial", "send", "board0", "echo before-the-job")
    r = panio("job", "run", str(sim_bench.dir / "boot.toml"), "--target", "board0", "--json", timeout=120)
    job_id = r.json()["id"]
    out = tmp_path / "artifacts"
    names = {a["name"] for a in panio("job", "artifacts", str(job_id), "--out", str(out), "--json").json()}
    assert "serial-console.log" in names
    log = (out / "serial-console.log").read_text()
    assert "U-Boot 2024.01-sim" in log and "Linux sim 6.1.0-sim" in log
    assert "before-the-job" not in log


def test_connect_refused_while_capture_runs_names_panios_capture_even_through_a_url(panio, sim_bench):
    r = panio.fails("serial", "connect", "board0", code=8)  # the device is a simboard:// URL over a PTY
    assert "panio's serial capture of board0" in r.err and "panio serial stop board0" in r.err
    assert r.error["holders"][0]["pid"] > 0
