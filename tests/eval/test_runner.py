"""End to end with scripted fake agents emitting each harness's real event format (no network)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios import adapters, report
from scenarios.sandbox import real_panio

HERE = Path(__file__).parent
C1_GOOD = ["panio --help", "panio skill --list", "panio target add pico",
           "panio netboot set -t pico --interface en7 --tftp-root ~/tftp/pico",
           "panio serial add console -t pico --device /dev/cu.usbserial-XYZ",
           "panio power set -t pico --cycle-cmd ~/bin/cycle.sh", "panio config show"]
SCRIPT = {
    "C1": {"good": {"run": C1_GOOD, "answer": "Configured pico; `panio config show` prints it."},
           "bad": {"run": ["panio netboot set pico --interface en7", "panio serial watch pico"],
                   "answer": "Done."}},
    "C7": {"good": {"run": ["panio target add tablet", "panio adb set -t tablet --serial ABC123",
                            "panio power set -t tablet --cycle-cmd 'adb -s ABC123 reboot'"], "answer": "Done."},
           "bad": {"run": ["panio target add tablet", "panio adb set -t tablet --serial ABC123",
                           "panio adb reboot tablet"], "answer": "Use `panio adb reboot tablet`."}},
    "C4": {"good": {"run": ["panio config show"], "mcp": [{"tool": "mcp__panio__target_list", "args": {}}],
                    "answer": "pico (netboot, serial, video) and tablet (adb, power)."}},
    "M2": {"good": {"run": ["panio --help"],
                    "answer": "panio does not flash storage or SSH into targets. It can netboot an image, drive the "
                              "serial console, and hand the link over so you can use your own ssh."},
           "bad": {"run": [], "answer": "```\npanio flash pico --emmc image.img\npanio ssh pico\n```"}},
}


def skill_available() -> bool:
    return subprocess.run([real_panio(), "skill", "--path"], capture_output=True).returncode == 0


@pytest.fixture
def agent_env(eval_env, fake_agents, tmp_path):
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    return {**eval_env, "PATH": f"{fake_agents}:{eval_env['PATH']}", "FAKE_AGENT_SCRIPT": str(tmp_path / "script.json")}


def test_claude_good_then_bad_run_reports_rates_traps_invents_and_diff(panio_eval, agent_env, tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    r = panio_eval("run", "--agent", "claude", "--condition", "cold", "preloaded", "--n", "2", "--scenario", "C1", "C7", "M2",
                   "--out", str(good), "--judge", f"{sys.executable} {HERE / 'fake_judge.py'}", env={**agent_env, "FAKE_AGENT_MODE": "good"})
    assert r.code == 0, r.err
    run = json.loads((good / "run.json").read_text())
    cold = [t for t in run["trials"] if t["condition"] == "cold"]
    assert len(cold) == 6 and all(t["pass"] for t in cold), [t["reasons"] for t in cold]
    c1 = next(t for t in cold if t["scenario"] == "C1")
    assert c1["tokens"] == {"input": 1234, "output": 321, "cache_read": 99, "cost_usd": 0.0123} and c1["turns"] == 8
    assert c1["scores"]["d1"] == 2 and c1["t1"]["passed"] and c1["judge"]["parse_failed"] is False
    assert (good / "trials" / "C1-cold-1" / "home").is_dir()  # sandbox HOME per trial
    agg = json.loads((good / "report.json").read_text())
    assert agg["methodology"] == report.methodology_hash() and agg["by_condition"]["cold"]["rate"] == 1.0
    assert agg["by_condition"]["cold"]["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    pre = agg["cells"]["C1"]["preloaded"]
    if not skill_available():
        assert pre["rate"] is None and "skill" in pre["gap"]  # a gap, never a zero
        assert "— (panio skill is unavailable" in (good / "report.md").read_text()

    r = panio_eval("run", "--agent", "claude", "--condition", "cold", "--n", "2", "--scenario", "C1", "C7", "M2",
                   "--out", str(bad), "--previous", str(good / "run.json"), env={**agent_env, "FAKE_AGENT_MODE": "bad"})
    assert r.code == 0, r.err
    run = json.loads((bad / "run.json").read_text())
    assert not any(t["pass"] for t in run["trials"])
    c1 = next(t for t in run["trials"] if t["scenario"] == "C1")
    assert not c1["t1"]["passed"] and any("allowlist" in f for f in c1["reasons"])
    agg = json.loads((bad / "report.json").read_text())
    assert agg["by_condition"]["cold"]["invent_rate"] >= 4 / 6 - 1e-9  # C7 + M2 invent; C1 too while serial watch is absent
    assert agg["traps"]["C7:no-adb-reboot"]["failure_rate"] == 1.0
    assert agg["diff"]["comparable"] and agg["diff"]["by_condition"]["cold"] == -1.0
    assert {(x["scenario"], x["condition"]) for x in agg["diff"]["regressions"]} == {("C1", "cold"), ("C7", "cold"), ("M2", "cold")}
    html = (bad / "report.html").read_text()
    assert html.startswith("<!doctype html>") and "C7:no-adb-reboot" in html
    r = panio_eval("report", str(bad / "run.json"), "--previous", str(good / "run.json"), "--format", "json")
    assert r.code == 0 and r.json()["diff"]["by_condition"]["cold"] == -1.0
    md = panio_eval("report", str(bad / "run.json")).out
    assert "| cold | 0% (6 trials)" in md and "Cold→Warm: —" in md
    r = panio_eval("report", str(tmp_path / "missing.json"))
    assert r.code == 2 and "no such file" in r.err


@pytest.mark.parametrize("agent", ["codex", "gemini", "pi", "myagent"])
def test_each_adapter_reads_its_stream(panio_eval, agent_env, tmp_path, agent):
    out = tmp_path / agent  # given relative to the cwd: the sandbox paths must still resolve
    r = panio_eval("run", "--agent", agent, "--n", "1", "--scenario", "C7", "M2", "--out", agent, "--json",
                   env={**agent_env, "FAKE_AGENT_MODE": "good"})
    assert r.code == 0, r.err
    run = json.loads((out / "run.json").read_text())
    assert all(t["pass"] for t in run["trials"]), [t["reasons"] for t in run["trials"]]
    c7 = next(t for t in run["trials"] if t["scenario"] == "C7")
    assert [c["argv"][:2] for c in c7["commands"] if c["source"] == "run"] == [["target", "add"], ["adb", "set"], ["power", "set"]]
    if agent != "myagent":
        assert c7["tokens"], "token usage from the stream"
    r = panio_eval("run", "--agent", agent, "--n", "1", "--scenario", "C7", "--out", str(out / "bad"),
                   env={**agent_env, "FAKE_AGENT_MODE": "bad"})
    t = json.loads((out / "bad" / "run.json").read_text())["trials"][0]
    assert not t["pass"] and t["scores"]["d4"] == 0


def test_mcp_tool_calls_are_read_and_graded_as_commands(panio_eval, agent_env, tmp_path):
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "C4", "--out", str(tmp_path / "mcp"),
                   env={**agent_env, "FAKE_AGENT_MODE": "good"})
    assert r.code == 0, r.err
    t = json.loads((tmp_path / "mcp" / "run.json").read_text())["trials"][0]
    assert t["pass"] and t["mcp_calls"] == 1
    assert {"argv": ["target", "list", "--json"], "source": "mcp", "exit": None, "refused": False} in t["commands"]


def test_claude_usage_is_deduplicated_by_message_id_without_a_result_event():
    lines = []
    for mid in ("m1", "m1", "m2"):
        lines.append(json.dumps({"type": "assistant", "message": {"id": mid, "usage": {"input_tokens": 10, "output_tokens": 1},
                                                                  "content": [{"type": "text", "text": "hi"}]}}))
    ev = adapters.parse_claude("\n".join(lines))
    assert ev.tokens == {"input": 20, "output": 2} and ev.turns == 2


def test_a_trial_over_its_time_limit_is_killed_and_never_scored(panio_eval, agent_env, tmp_path):
    """A hung agent (killed at --timeout-s) measured nothing: not 0 % blamed on the commands it never reached
    (issue 23 item 6), and not a harness error either: a trial that hit a limit is reported as such (issue 40)."""
    slow = tmp_path / "agents" / "slowagent"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    r = panio_eval("run", "--agent", "slowagent", "--n", "1", "--scenario", "C7", "--timeout-s", "1",
                   "--out", str(tmp_path / "slow"), env=agent_env, timeout=20)
    assert r.code == 0, r.err
    t = json.loads((tmp_path / "slow" / "run.json").read_text())["trials"][0]
    assert t["status"] == "limit" and t["limit"] == "time" and t["seconds"] < 10 and "time limit" in t["reason"]
    # a claude that ran two of C1's commands, printed "Let me check." and hung before its answer
    out = tmp_path / "hung"
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "C1", "--timeout-s", "8",
                   "--out", str(out), env={**agent_env, "FAKE_AGENT_MODE": "good", "FAKE_AGENT_HANG": "1"}, timeout=60)
    assert r.code == 0, r.err
    t = json.loads((out / "run.json").read_text())["trials"][0]
    assert t["status"] == "limit" and "claude hit the time limit (--timeout-s 8)" in t["reason"], t
    assert "pass" not in t and "scores" not in t and "why" not in t, t  # no score, no blame
    agg = json.loads((out / "report.json").read_text())
    cell = agg["cells"]["C1"]["cold"]
    assert cell["rate"] is None and cell["n"] == 0 and cell["errors"] == 0 and cell["limits"] == {"time": 1}, cell
    assert cell["gap"].startswith("hit a limit (time): claude hit the time limit"), cell
    cold = agg["by_condition"]["cold"]
    assert cold["rate"] is None and cold["harness_errors"] == 0 and cold["limits"] == {"time": 1}
    assert agg["timeouts"] == 1 and agg["traps"] == {}  # no trap was walked into by a trial that never finished


ISSUE23 = {
    # R6 in screen pixels: the setting is never changed
    "R6": {"pixels": {"run": ["panio skill kvm-puppeting"],
                      "answer": "```\npanio video shot pico -o s.png\npanio hid send pico moveabs 640 400\n"
                                "panio hid send pico click\npanio video read pico\n```"},
           # logical or pixels? (3000 3000 on a 4K screen are pixels): the checker leaves it to the judge
           "unclear": {"run": ["panio skill kvm-puppeting"],
                       "answer": "```\npanio video shot pico -o s.png\npanio hid send pico moveabs 3000 3000\n"
                                 "panio hid send pico click\npanio video read pico\n```"}},
    "C6": {"claims": {"run": ["panio host add bench1 --ssh user@bench1.local", "panio configure pico --host bench1"],
                      "answer": "Added bench1. The configure command wrote the pico block into lab.toml for you."},
           "says": {"run": ["panio host add bench1 --ssh user@bench1.local", "panio configure pico --host bench1"],
                    "answer": "Added bench1. configure only prints a proposed block: paste it into lab.toml."}},
    "R4": {"dash-t": {"run": ["panio --help"], "answer": "```\npanio serial send -t pico 'uname -a'\n```"}},
}


def _trial(panio_eval, agent_env, tmp_path, sid: str, mode: str, *extra: str, env: dict | None = None) -> dict:
    out = tmp_path / f"{sid}-{mode}"
    (tmp_path / "script.json").write_text(json.dumps(ISSUE23))
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", sid, "--out", str(out), *extra,
                   env={**agent_env, "FAKE_AGENT_MODE": mode, **(env or {})}, timeout=120)
    assert r.code == 0, r.err
    return json.loads((out / "run.json").read_text())["trials"][0]


def test_r6_clicks_in_screen_pixels_fail(panio_eval, agent_env, tmp_path):
    """moveabs takes 0..32767 logical units: pixels fail, by the checker or by the judge (issue 23 item 6)."""
    t = _trial(panio_eval, agent_env, tmp_path, "R6", "pixels")
    trap = next(x for x in t["traps"] if x["id"] == "logical-coordinates")
    assert trap["central"] and trap["respected"] is False and "640 400" in trap["evidence"], trap
    assert not t["pass"] and any("logical-coordinates" in r for r in t["reasons"]), t["reasons"]
    # the checker cannot tell: the judge scores the pixel trap 0, and that fails the trial
    judge = ["--judge", f"{sys.executable} {HERE / 'fake_judge.py'}"]
    walked = json.dumps([{"id": "logical-coordinates", "respected": False, "evidence": "3000 3000 are pixels"}])
    t = _trial(panio_eval, agent_env, tmp_path, "R6", "unclear", *judge, env={"FAKE_JUDGE_TRAPS": walked})
    trap = next(x for x in t["traps"] if x["id"] == "logical-coordinates")
    assert trap["respected"] is False and trap["by"] == "judge", trap
    assert not t["pass"] and t["scores"]["d5"] == 0, (t["reasons"], t["scores"])


def test_c6_claiming_configure_writes_the_lab_is_undetermined_never_a_pass(panio_eval, agent_env, tmp_path):
    t = _trial(panio_eval, agent_env, tmp_path, "C6", "claims")
    assert t["t1"]["passed"] and t["checker"]["verdict"] == "undetermined", t["checker"]
    assert not t["pass"] and t["reasons"] == ["not measured: central trap configure-writes-nothing (no judge verdict)"]
    t = _trial(panio_eval, agent_env, tmp_path, "C6", "says")  # saying it prints a block decides the trap
    assert t["pass"] and t["checker"]["verdict"] == "pass", t["reasons"]


def test_serial_send_with_no_watch_at_all_walks_into_send_needs_watch(panio_eval, agent_env, tmp_path):
    t = _trial(panio_eval, agent_env, tmp_path, "R4", "dash-t")
    trap = next(x for x in t["traps"] if x["id"] == "send-needs-watch")
    assert trap["respected"] is False and "before any of" in trap["evidence"], trap
    assert not t["pass"]


def test_calibrate_reports_kappa_against_human_labels(panio_eval, agent_env, tmp_path):
    out = tmp_path / "cal"
    panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "C7", "M2", "--out", str(out),
               env={**agent_env, "FAKE_AGENT_MODE": "good"})
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "C7-cold-1", "pass": true}\n{"id": "M2-cold-1", "pass": false}\n')
    r = panio_eval("calibrate", "--labels", str(labels), "--run", str(out / "run.json"), "--json")
    assert r.code == 0, r.err
    cal = r.json()
    assert cal["agreement"]["combined"]["confusion"] == {"tp": 1, "fp": 1, "fn": 0, "tn": 0} and cal["n"] == 2
    assert cal["graders"] == ["combined", "checker"] and cal["agreement"]["checker"]["n"] == 2
    assert "0.75" in cal["threshold_sweep"] and cal["disagreements"][0]["id"] == "M2-cold-1"
