"""Harness honesty: a harness that fails is an error shown as a gap, never a score; what ran is recorded."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios.adapters import adapter
from scenarios.sandbox import Sandbox

HERE = Path(__file__).parent
SCRIPT = {
    "C7": {"good": {"run": ["panio --help", "panio target add tablet", "panio adb set -t tablet --serial ABC123",
                            "panio power set -t tablet --cycle-cmd 'adb -s ABC123 reboot'"], "answer": "Done."}},
    "M2": {"good": {"run": [], "answer": "panio does not flash storage or SSH into targets; it can netboot and "
                                         "drive the serial console."}},
}


@pytest.fixture
def env(eval_env, fake_agents, tmp_path):
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    return {**eval_env, "PATH": f"{fake_agents}:{eval_env['PATH']}", "FAKE_AGENT_SCRIPT": str(tmp_path / "script.json"),
            "FAKE_AGENT_MODE": "good", "FAKE_AGENT_ARGV_LOG": str(tmp_path / "argv.jsonl")}


def test_a_harness_that_fails_at_once_is_an_error_and_a_gap_never_a_score(panio_eval, env, tmp_path):
    out = tmp_path / "crash"
    r = panio_eval("run", "--agent", "claude", "--n", "3", "--scenario", "C7", "M2", "--out", str(out),
                   env={**env, "FAKE_AGENT_CRASH": "1"})
    assert r.code == 0, r.err
    run = json.loads((out / "run.json").read_text())
    assert {t["status"] for t in run["trials"]} == {"error"}
    assert all("claude exited 1: Error: Invalid API key" in t["reason"] and "pass" not in t for t in run["trials"])
    agg = json.loads((out / "report.json").read_text())
    cold = agg["by_condition"]["cold"]
    assert cold["rate"] is None and cold["invent_rate"] is None and cold["trials"] == 0 and cold["harness_errors"] == 6
    assert agg["traps"] == {}  # no trap "failure rates" from runs that did not happen
    assert agg["cells"]["C7"]["cold"]["gap"].startswith("harness failed: claude exited 1")
    md = (out / "report.md").read_text()
    assert "| cold | — (0 trials)" in md and "— (harness failed: claude exited 1" in md
    r = panio_eval("run", "--agent", "gemini", "--n", "1", "--scenario", "M2", "--out", str(tmp_path / "silent"),
                   env={**env, "FAKE_AGENT_SILENT": "1"})
    t = json.loads((tmp_path / "silent" / "run.json").read_text())["trials"][0]
    assert t["status"] == "error" and t["reason"] == "gemini printed no answer and took no action"


def test_codex_runs_with_the_current_sandbox_flag_and_its_login_shell_keeps_the_shim(panio_eval, env, tmp_path):
    out = tmp_path / "codex"
    r = panio_eval("run", "--agent", "codex", "--n", "1", "--scenario", "C7", "--out", str(out), "--model", "gpt-5-codex", env=env)
    assert r.code == 0, r.err
    run = json.loads((out / "run.json").read_text())
    t = run["trials"][0]
    assert t["status"] == "done" and t["pass"], t.get("reasons") or t.get("reason")
    # the shim saw every command the login shell ran (it would not, had /etc/profile reset PATH)
    assert [c["argv"][:2] for c in t["commands"] if c["source"] == "run"] == [["--help"], ["target", "add"], ["adb", "set"], ["power", "set"]]
    argv = [json.loads(x) for x in (tmp_path / "argv.jsonl").read_text().splitlines()]
    codex = next(a["argv"] for a in argv if a["format"] == "codex")
    assert "--full-auto" not in codex and codex[codex.index("--sandbox") + 1] == "workspace-write"
    assert codex[codex.index("--model") + 1] == "gpt-5-codex"
    assert run["model"] == "gpt-5-codex" and run["harness_version"] == "9.9.9 (fake codex)"


def test_login_shells_in_the_sandbox_find_the_shim_first(tmp_path):
    box = Sandbox(tmp_path / "box").create(None, [])
    for argv in (["bash", "-lc", "command -v panio"], ["sh", "-lc", "command -v panio"], ["bash", "-c", "command -v panio"]):
        p = subprocess.run(argv, env=box.env(), cwd=box.cwd, capture_output=True, text=True, timeout=30)
        assert p.stdout.strip() == str(box.bin / "panio"), (argv, p.stdout, p.stderr)


def test_pi_gets_provider_model_and_pass_through_arguments(panio_eval, env, tmp_path):
    r = panio_eval("run", "--agent", "pi", "--n", "1", "--scenario", "M2", "--out", str(tmp_path / "pi"),
                   "--provider", "openrouter", "--model", "z-ai/glm-5.2", "--agent-arg=--thinking", "--agent-arg", "off",
                   env=env)
    assert r.code == 0, r.err
    argv = next(json.loads(x)["argv"] for x in (tmp_path / "argv.jsonl").read_text().splitlines())
    assert argv[:4] == ["--print", "--mode", "json", "--no-session"]
    assert argv[4:10] == ["--provider", "openrouter", "--model", "z-ai/glm-5.2", "--thinking", "off"]
    assert "--n 1 gives no usable spread" in r.err
    run = json.loads((tmp_path / "pi" / "run.json").read_text())
    assert run["provider"] == "openrouter" and run["agent_args"] == ["--thinking", "off"]


def test_gemini_warm_is_realized_through_its_skills_dir(tmp_path):
    skill = tmp_path / "SKILL.md"
    skill.write_text("---\nname: panio\ndescription: drive benches\n---\nbody\n")
    assert adapter("gemini").register(tmp_path / "home", "warm", skill) is None
    assert (tmp_path / "home" / ".gemini" / "skills" / "panio" / "SKILL.md").read_text() == skill.read_text()


def test_the_judge_may_not_be_the_model_under_test(panio_eval, env):
    r = panio_eval("run", "--agent", "claude", "--n", "3", "--scenario", "M2", "--judge", "claude -p", env=env)
    assert r.code == 2 and "the judge may not be the model under test" in r.err
    r = panio_eval("run", "--agent", "pi", "--model", "z-ai/glm-5.2", "--n", "3", "--scenario", "M2",
                   "--judge", "llm -m z-ai/glm-5.2", env=env)
    assert r.code == 2 and "names the agent's model z-ai/glm-5.2" in r.err


def test_a_killed_run_keeps_the_trials_it_finished(env, tmp_path):
    slow = tmp_path / "agents" / "slowpi"
    slow.write_text(f"#!/bin/sh\n[ \"$PANIO_EVAL_SCENARIO\" = M2 ] && exec sleep 60\n"
                    f"FAKE_AGENT_FORMAT=pi exec {sys.executable} {HERE / 'fake_agent.py'} \"$@\"\n")
    slow.chmod(0o755)
    out = tmp_path / "killed"
    p = subprocess.Popen([str(Path(sys.executable).parent / "panio-eval"), "run", "--agent", "slowpi", "--n", "1",
                          "--parallel", "1", "--scenario", "C7", "M2", "--out", str(out)],
                         env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (out / "run.json").exists() and json.loads((out / "run.json").read_text())["trials"]:
                break
            time.sleep(0.2)
        os.killpg(p.pid, signal.SIGKILL)
    finally:
        p.wait(timeout=30)
    run = json.loads((out / "run.json").read_text())
    assert run["state"] == "running" and [t["id"] for t in run["trials"]] == ["C7-cold-1"]
    assert run["trials"][0]["pass"]


MCP_SCRIPT = {
    "R8": {"good": {"run": ["command -v panio || echo 'no panio CLI here'"],
                    "mcp": [{"tool": "mcp__panio__power_state", "args": {"target": "pico"}}],
                    "answer": "It reads the plug's state; nothing changes."}},
    "s3": {"good": {"run": [], "answer": "```json\n{\"tool\": \"serial_log\", \"arguments\": {\"target\": \"dut\", "
                                         "\"tail\": 1}}\n{\"tool\": \"serial_log\", \"arguments\": {\"target\": \"dut\", "
                                         "\"since\": 1042}}\n```\n(the tool list)"}},
}


def test_mcp_condition_registers_panio_mcp_instead_of_the_cli(panio_eval, env, tmp_path):
    (tmp_path / "mcp.json").write_text(json.dumps(MCP_SCRIPT))
    env = {**env, "FAKE_AGENT_SCRIPT": str(tmp_path / "mcp.json")}
    out = tmp_path / "mcp"
    r = panio_eval("run", "--agent", "claude", "--condition", "mcp", "--n", "1", "--scenario", "R8", "s3", "C7",
                   "--out", str(out), env=env)
    assert r.code == 0, r.err
    run = json.loads((out / "run.json").read_text())
    by = {t["scenario"]: t for t in run["trials"]}
    assert set(by) == {"R8", "s3"}  # C7 (config) has no mcp condition: panio mcp does not configure
    assert by["R8"]["pass"] and {"argv": ["power-state", "pico"], "source": "mcp", "exit": None, "refused": False} in by["R8"]["commands"]
    assert by["s3"]["pass"], by["s3"]["reasons"]  # tool calls stated as JSON lines are graded like commands
    argv = next(json.loads(x)["argv"] for x in (tmp_path / "argv.jsonl").read_text().splitlines())
    conf = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())["mcpServers"]["panio"]
    labs = {str(out / "trials" / f"{sid}-mcp-1" / "lab.toml") for sid in ("R8", "s3")}
    assert conf["args"][-1] == "mcp" and conf["args"][0] == "--lab" and conf["args"][1] in labs
    assert "--strict-mcp-config" in argv and "mcp__panio" in argv[argv.index("--allowedTools") + 1]
    stream = (out / "trials" / "R8-mcp-1" / "stream.jsonl").read_text()
    assert "no panio CLI here" in stream  # the CLI is not on PATH under mcp
    r = panio_eval("run", "--agent", "pi", "--condition", "mcp", "--n", "1", "--scenario", "R8", "--out", str(tmp_path / "pi"), env=env)
    agg = json.loads((tmp_path / "pi" / "report.json").read_text())
    assert agg["cells"]["R8"]["mcp"]["gap"] == "pi has no MCP client: the mcp condition is not realizable"


def test_two_raters_get_the_checkers_verdict_and_disagreements_are_kept(panio_eval, env, tmp_path):
    script = {"C7": {"bad": {"run": ["panio target add tablet", "panio adb set -t tablet --serial ABC123"],
                             "answer": "Reboot it with `panio adb reboot tablet`."}}}
    (tmp_path / "s.json").write_text(json.dumps(script))
    judge = f"{sys.executable} {HERE / 'fake_judge.py'}"
    out = tmp_path / "judged"
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "C7", "--out", str(out), "--judge", judge,
                   "--judge2", judge, env={**env, "FAKE_AGENT_SCRIPT": str(tmp_path / "s.json"), "FAKE_AGENT_MODE": "bad"})
    assert r.code == 0, r.err
    t = json.loads((out / "run.json").read_text())["trials"][0]
    assert not t["pass"] and t["checker"]["verdict"] == "fail"
    for key in ("judge", "judge2"):  # the (lenient) fake judge passes it: reported, not allowed to repair the D4 hard fail
        assert t[key]["alone"] == "pass"
        assert {"what": "d4", "checker": 0, "judge": 2} in t[key]["disagreements"]
    agg = json.loads((out / "report.json").read_text())
    assert agg["inter_rater"] == {"n": 1, "kappa": 1.0, "confusion": {"tp": 1, "fp": 0, "fn": 0, "tn": 0}}
    assert agg["by_condition"]["cold"]["judge_disagreements"] == 1
    md = (out / "report.md").read_text()
    assert "checker–judge disagreements: 1 trial(s)" in md and "second rater: kappa 1.00 over 1 trials" in md
    assert f"graders: checker, judge `{judge}`, judge `{judge}`" in md
