"""Reports a maintainer acts on: lab traps counted, why each cell failed, invented commands, deltas, and HTML
that renders as real tables in headless Chromium (driven over WebDriver, screenshot decoded and checked)."""

import base64
import json
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
import zlib
from pathlib import Path

import pytest

SCRIPT = {
    "C2": {"good": {"run": ["panio serial add bmc -t pico --device /dev/ttyUSB1 --baud 9600"], "answer": "Added bmc."},
           "bad": {"run": ["panio serial set console -t pico --device /dev/ttyUSB1 --baud 9600"], "answer": "Updated."}},
    "C7": {"good": {"run": ["panio target add tablet", "panio adb set -t tablet --serial ABC123",
                            "panio power set -t tablet --cycle-cmd 'adb -s ABC123 reboot'"], "answer": "Done."},
           "bad": {"run": ["panio target add tablet", "panio adb set -t tablet --serial ABC123"],
                   "answer": "Reboot it with `panio adb reboot tablet`."}},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A good run, then a bad one diffed against it (fake claude; one pair for every test here)."""
    import os
    import sys

    tmp = tmp_path_factory.mktemp("report")
    agents = tmp / "agents"
    agents.mkdir()
    (agents / "claude").write_text(f"#!/bin/sh\nFAKE_AGENT_FORMAT=claude exec {sys.executable} "
                                   f"{Path(__file__).parent / 'fake_agent.py'} \"$@\"\n")
    (agents / "claude").chmod(0o755)
    (tmp / "script.json").write_text(json.dumps(SCRIPT))
    (tmp / "home").mkdir()
    env = {**os.environ, "HOME": str(tmp / "home"), "PANIO_STATE_DIR": str(tmp / "state"), "PANIO_LAB": str(tmp / "no.toml"),
           "PATH": f"{agents}:{os.environ['PATH']}", "FAKE_AGENT_SCRIPT": str(tmp / "script.json")}
    good, bad = tmp / "good", tmp / "bad"
    for out, mode, prev in ((good, "good", []), (bad, "bad", ["--previous", str(good / "run.json")])):
        p = subprocess.run([str(Path(sys.executable).parent / "panio-eval"), "run", "--agent", "claude", "--condition",
                            "cold", "warm", "--n", "2", "--scenario", "C2", "C7", "--out", str(out), *prev],
                           env={**env, "FAKE_AGENT_MODE": mode}, cwd=tmp, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
    return good, bad


def test_report_counts_lab_traps_says_why_and_names_invented_commands(runs):
    good, bad = runs
    agg = json.loads((bad / "report.json").read_text())
    assert agg["traps"]["C2:named-interfaces"] == {"central": True, "walked": 4, "decided": 4, "failure_rate": 1.0,
                                                   "failure_rate_ci": [0.5101, 1.0]}  # Wilson 95 %: 4/4 is 51-100 %
    cell = agg["cells"]["C7"]["cold"]
    assert cell["invented"] == ["panio adb reboot tablet"]
    whats = {w["what"] for w in cell["why"]}
    assert "D4 invented" in whats and any(w.startswith("lab targets.tablet.power.cycle_cmd") for w in whats)
    c2 = {w["what"]: w for w in agg["cells"]["C2"]["warm"]["why"]}
    assert c2["trap named-interfaces"]["trials"] == 2 and "/dev/ttyUSB1" in c2["trap named-interfaces"]["evidence"]
    assert agg["deltas"]["per_scenario"]["C2"]["cold_to_warm"] == 0
    md = (bad / "report.md").read_text()
    assert "## Why cells failed" in md and "| C7 cold | D4 invented | 2/2 |" in md
    assert "| scenario | cold | warm | Cold→Warm | Warm→Preloaded |" in md and "| C2 | 0% (0/2, score" in md
    assert "regression C2/cold: 100% → 0%" in md
    assert "0.6666" not in md and "66.66" not in md  # rounded figures


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wd(port: int, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB(A) non-interlaced PNG (what Chromium writes) into rows of pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw, rows, prev = zlib.decompress(idat), [], bytearray(w * bpp)
    stride = w * bpp + 1
    for y in range(h):
        f, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
        for x in range(len(line)):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            p = a + b - c
            pred = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else (b if abs(p - b) <= abs(p - c) else c)
            line[x] = (line[x] + (0, a, b, (a + b) // 2, pred)[f]) & 0xFF
        rows.append(bytes(line[i] for i in range(0, len(line), bpp)))  # the red channel is enough here
        prev = line
    return w, h, rows


@pytest.mark.skipif(not shutil.which("chromedriver") or not shutil.which("chromium"),
                    reason="chromium + chromium-driver (scripts/system-deps.sh installs them)")
def test_html_report_renders_as_tables_in_headless_chromium(runs, tmp_path):
    _, bad = runs
    page = bad / "report.html"
    md_tables = (bad / "report.md").read_text().count("\n|---")
    port = _free_port()
    drv = subprocess.Popen(["chromedriver", f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                if _wd(port, "GET", "/status")["value"]["ready"]:
                    break
            except OSError:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": shutil.which("chromium"),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800",
                     f"--user-data-dir={tmp_path / 'profile'}"]}}}}
        sid = _wd(port, "POST", "/session", caps)["value"]["sessionId"]
        try:
            _wd(port, "POST", f"/session/{sid}/url", {"url": page.as_uri()})
            tables = _wd(port, "POST", f"/session/{sid}/execute/sync", {"args": [], "script": """
                return [...document.querySelectorAll('table')].map(t => ({
                  rows: t.rows.length, head: t.querySelectorAll('thead th').length,
                  cols: [...t.rows].map(r => r.cells.length),
                  widths: [...t.rows].map(r => Math.round(r.getBoundingClientRect().width)),
                  height: t.getBoundingClientRect().height}));"""})["value"]
            shot = base64.b64decode(_wd(port, "GET", f"/session/{sid}/screenshot")["value"])
        finally:
            _wd(port, "DELETE", f"/session/{sid}")
    finally:
        drv.terminate()
        drv.wait(timeout=30)
    # one table per Markdown table, each a header row and its body rows, every row as wide as its header
    assert len(tables) == md_tables >= 4
    for t in tables:
        assert t["rows"] >= 2 and t["head"] == t["cols"][0] and len(set(t["cols"])) == 1, t
        assert len(set(t["widths"])) == 1 and t["height"] > 20 * t["rows"] * 0.8, t
    w, h, rows = _png(shot)
    assert (w, h) == (1400, 1800) or w >= 1000
    # the grid is drawn: many rows carry a long run of border-grey pixels (a table rule), the page is not blank
    rules = sum(1 for r in rows if max((len(run) for run in r.split(b"\xff") if set(run) <= {0xbb, 0xbc, 0xba}), default=0) > 300)
    dark = sum(1 for r in rows for v in r[::7] if v < 80)
    assert rules >= 10 and dark > 500, (rules, dark)
