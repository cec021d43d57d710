"""panio-eval --check: drift fails, missing announced commands are pending, new commands unblock."""

import json
import shutil
import time
from pathlib import Path

from scenarios import safe
from scenarios.drift import Guard
from scenarios.scenario import load, load_all
from scenarios.surface import CATALOG, Surface, planned_spec


def test_check_passes_and_names_pending_commands(panio_eval):
    t0 = time.monotonic()
    r = panio_eval("--check", "--json")
    assert time.monotonic() - t0 < 60.0  # a hang, not a speed figure (the check needs no agent and no network)
    assert r.code == 0, r.err
    rep = r.json()
    assert rep["ok"] and rep["errors"] == []
    # every command the catalog needs has landed (setup last): nothing is pending
    assert rep["pending"] == {}
    human = panio_eval("--check")
    assert "pending" not in human.out.split("\n", 1)[-1]


def _copy(tmp_path: Path, sid: str, old: str, new: str) -> Path:
    d = tmp_path / "cat"
    (d / "labs").mkdir(parents=True)
    for lab in (CATALOG / "labs").glob("*.toml"):
        shutil.copy(lab, d / "labs" / lab.name)
    text = (CATALOG / f"{sid}.toml").read_text()
    assert old in text
    (d / f"{sid}.toml").write_text(text.replace(old, new))
    return d / f"{sid}.toml"


def test_a_typo_or_an_invented_flag_in_a_reference_is_drift(tmp_path):
    g = Guard()
    bad_cmd = load(_copy(tmp_path, "C2", "panio serial add bmc", "panio serial ad bmc"))
    rep = g.run([bad_cmd])
    assert any("serial ad" in e and "not a panio command" in e for e in rep.errors)
    bad_flag = load(_copy(tmp_path / "2", "C2", "--baud 9600", "--speed 9600"))
    rep = g.run([bad_flag])
    assert any("--speed" in e for e in rep.errors), rep.errors


def test_a_flag_of_an_announced_command_is_checked_once_it_lands(tmp_path):
    # the "live" tree gains serial watch/log (as the serial branch will deliver them)
    spec = planned_spec()
    serial = spec["children"]["serial"]["children"]
    arrived = {"children": {"serial": {"children": {"watch": serial["watch"], "log": serial["log"]}}}}
    live = Surface.live().overlay(arrived)
    g = Guard(live)
    s2 = next(s for s in load_all() if s.id == "s2")
    rep = g.run([s2])
    assert "s2" not in rep.pending and rep.errors == []
    drifted = load(_copy(tmp_path, "s2", "panio serial log dut --tail 30", "panio serial log dut --last 30"))
    rep = g.run([drifted])
    assert any("--last" in e for e in rep.errors)


def test_safe_allowlist_entries_must_exist_or_be_announced(monkeypatch):
    monkeypatch.setitem(safe.SAFE, "serial frobnicate", safe.ANY)
    rep = Guard().run(load_all())
    assert not rep.ok
    assert any("SAFE allowlist" in e and "serial frobnicate" in e for e in rep.errors)
    assert "netif status" not in rep.safe_pending  # live now


def test_check_json_is_parseable_and_human_errors_are_two_lines(panio_eval):
    r = panio_eval("run", "--scenario", "Z9", "--reference")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("panio-eval: ") and json.loads(lines[1])["exit"] == 2
