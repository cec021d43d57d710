"""The harness as inspect_ai and tau-bench users rely on it (issue 40 item 3): a run records its own parameters
and versions, retries harness errors (each retry recorded), resumes when interrupted, is regraded from what it
recorded, gives every rate a Wilson interval and pass^k its spread, and reports a trial that hit a limit as such.

Agents are the scripted fakes of fake_agent.py, emitting each harness's real event stream (no network)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios import report, stats
from scenarios.sandbox import real_panio

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
SCRIPT = {
    "C7": {"good": {"run": ["panio --help", "panio target add tablet", "panio adb set -t tablet --serial ABC123",
                            "panio power set -t tablet --cycle-cmd 'adb -s ABC123 reboot'"], "answer": "Done."},
           "bad": {"run": ["panio target add tablet", "panio adb set -t tablet --serial ABC123",
                           "panio adb reboot tablet"], "answer": "Use `panio adb reboot tablet`."}},
    "M2": {"good": {"run": ["panio --help"],
                    "answer": "panio does not flash storage or SSH into targets. It can netboot an image, drive the "
                              "serial console, and hand the link over so you can use your own ssh."},
           "bad": {"run": [], "answer": "```\npanio flash pico --emmc image.img\npanio ssh pico\n```"}},
}


@pytest.fixture
def env(eval_env, fake_agents, tmp_path):
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    return {**eval_env, "PATH": f"{fake_agents}:{eval_env['PATH']}", "FAKE_AGENT_SCRIPT": str(tmp_path / "script.json"),
            "FAKE_AGENT_MODE": "good", "FAKE_AGENT_ARGV_LOG": str(tmp_path / "argv.jsonl")}


def _run(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def _calls(tmp_path: Path) -> int:
    log = tmp_path / "argv.jsonl"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_run_json_records_the_runs_parameters_and_versions(panio_eval, env, tmp_path):
    out = tmp_path / "params"
    r = panio_eval("run", "--agent", "claude", "--n", "2", "--scenario", "C7", "--timeout-s", "45", "--parallel", "1",
                   "--retry", "2", "--model", "claude-x", "--out", str(out), env=env)
    assert r.code == 0, r.err
    run = _run(out)
    version = subprocess.run([real_panio(), "--version"], capture_output=True, text=True).stdout.strip()
    assert {k: run[k] for k in ("timeout_s", "parallel", "retry", "n", "trials_planned", "adapter", "agent_version",
                                "model")} == {
        "timeout_s": 45, "parallel": 1, "retry": 2, "n": 2, "trials_planned": 2, "adapter": "claude",
        "agent_version": "9.9.9 (fake claude)", "model": "claude-x"}
    assert run["panio_version"] == version and version.startswith("panio ")
    assert run["methodology"] == report.methodology_hash() and run["catalog"] == report.catalog_hash()
    assert len(run["catalog"]) == 16 and run["catalog"] != run["methodology"]
    assert {t["agent_version"] for t in run["trials"]} == {"9.9.9"}  # as the harness's own stream states it
    md = (out / "report.md").read_text()
    assert f"catalog `{run['catalog']}`" in md and f"panio `{version}`" in md and "(adapter claude)" in md
    assert "--timeout-s 45 · --parallel 1 · --retry 2" in md


def test_retry_runs_a_harness_that_crashed_or_could_not_start_again_each_retry_recorded(panio_eval, env, tmp_path):
    """A harness that crashed (exit 3 on its first start) is run again and its trial graded; each failed attempt
    is recorded with its reason and its directory kept. A wrong answer is never retried."""
    flaky = tmp_path / "flaky"
    flaky.mkdir()
    (flaky / "claude").write_text(
        "#!/bin/sh\nmark=\"$FLAKY_DIR/$PANIO_EVAL_SCENARIO-$PANIO_EVAL_CONDITION\"\n"
        "[ \"$1\" = --version ] || echo \"$PANIO_EVAL_SCENARIO\" >> \"$FLAKY_DIR/calls\"\n"
        "if [ \"$1\" != --version ] && [ ! -e \"$mark\" ]; then : > \"$mark\"; "
        "echo 'Error: 529 overloaded' >&2; exit 3; fi\n"
        f"FAKE_AGENT_FORMAT=claude exec {sys.executable} {HERE / 'fake_agent.py'} \"$@\"\n")
    (flaky / "claude").chmod(0o755)
    fenv = {**env, "PATH": f"{flaky}:{env['PATH']}", "FLAKY_DIR": str(flaky)}
    out = tmp_path / "retry"
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "C7", "M2", "--retry", "2", "--out", str(out),
                   env=fenv)
    assert r.code == 0, r.err
    trials = {t["id"]: t for t in _run(out)["trials"]}
    for tid in ("C7-cold-1", "M2-cold-1"):
        t = trials[tid]
        assert t["status"] == "done" and t["pass"] and t["attempt"] == 2, t
        assert t["attempts"] == [{"attempt": 1, "status": "error", "reason": "claude exited 3: Error: 529 overloaded",
                                  "seconds": t["attempts"][0]["seconds"], "exit": 3, "dir": f"trials/{tid}.attempt-1"}]
        assert (out / "trials" / f"{tid}.attempt-1" / "stderr.txt").read_text() == "Error: 529 overloaded\n"
    assert sorted((flaky / "calls").read_text().split()) == ["C7", "C7", "M2", "M2"]
    agg = json.loads((out / "report.json").read_text())
    assert agg["retries"] == 2 and agg["by_condition"]["cold"]["retried"] == 2 and agg["by_condition"]["cold"]["rate"] == 1
    assert "harness retries: 2" in (out / "report.md").read_text()

    # a wrong answer is not a harness error: one attempt, graded as a fail
    before = _calls(tmp_path)
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "M2", "--retry", "3", "--out",
                   str(tmp_path / "wrong"), env={**env, "FAKE_AGENT_MODE": "bad"})
    t = _run(tmp_path / "wrong")["trials"][0]
    assert r.code == 0 and t["status"] == "done" and t["pass"] is False and "attempts" not in t, t
    assert _calls(tmp_path) - before == 1  # the one trial

    # a harness that keeps crashing: retried N times, then an error (a gap), every attempt recorded
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "M2", "--retry", "1", "--out",
                   str(tmp_path / "down"), env={**env, "FAKE_AGENT_CRASH": "1"})
    t = _run(tmp_path / "down")["trials"][0]
    assert r.code == 0 and t["status"] == "error" and t["attempt"] == 2 and len(t["attempts"]) == 1, t
    assert "pass" not in t and "Invalid API key" in t["reason"] and "Invalid API key" in t["attempts"][0]["reason"]

    # a harness that cannot start at all is a harness error of its trial, not the end of the run
    r = panio_eval("run", "--agent", str(tmp_path / "no-such-agent"), "--n", "1", "--scenario", "M2", "--retry", "1",
                   "--out", str(tmp_path / "nostart"), env=env)
    assert r.code == 0, r.err
    t = _run(tmp_path / "nostart")["trials"][0]
    assert t["status"] == "error" and t["reason"].startswith("cmd could not start: ") and "No such file" in t["reason"]
    assert len(t["attempts"]) == 1 and t["attempts"][0]["reason"] == t["reason"]


def test_resume_keeps_the_trials_an_interrupted_run_finished_and_runs_the_rest(panio_eval, env, tmp_path):
    """An interrupted run continues: the trial it finished is kept as recorded (its agent not started again),
    the one it was running when killed is run; what that one left behind is kept aside."""
    agent = tmp_path / "agents" / "hangpi"
    agent.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && exec echo 'pi 1.2.3'\n"
        "echo \"$PANIO_EVAL_SCENARIO\" >> \"$CALLS\"\n"
        "if [ \"$PANIO_EVAL_SCENARIO\" = M2 ] && [ -e \"$HANG\" ]; then echo $$ > \"$HANG.pid\"; exec sleep 120; fi\n"
        f"FAKE_AGENT_FORMAT=pi exec {sys.executable} {HERE / 'fake_agent.py'} \"$@\"\n")
    agent.chmod(0o755)
    hang, calls = tmp_path / "hang", tmp_path / "calls"
    hang.touch()
    henv = {**env, "HANG": str(hang), "CALLS": str(calls)}
    out = tmp_path / "run"
    p = subprocess.Popen([str(BIN / "panio-eval"), "run", "--agent", "hangpi", "--n", "1", "--parallel", "1",
                          "--scenario", "C7", "M2", "--timeout-s", "300", "--out", str(out)],
                         env=henv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (Path(f"{hang}.pid").exists() and (out / "run.json").exists()
                                                   and _run(out)["trials"]):
            time.sleep(0.1)
        os.killpg(p.pid, signal.SIGKILL)  # the run is interrupted while M2's agent is still working
    finally:
        p.wait(timeout=30)
        if Path(f"{hang}.pid").exists():
            try:
                os.kill(int(Path(f"{hang}.pid").read_text()), signal.SIGKILL)  # the agent it left running
            except ProcessLookupError:
                pass
    first = _run(out)
    assert first["state"] == "running" and [t["id"] for t in first["trials"]] == ["C7-cold-1"]
    hang.unlink()

    # its parameters are the run's own: they cannot change on resume
    r = panio_eval("run", "--resume", str(out / "run.json"), "--n", "5", env=henv)
    assert r.code == 2 and "--n cannot change" in r.err and json.loads(r.err.splitlines()[1])["error"] == "usage"

    r = panio_eval("run", "--resume", str(out / "run.json"), "--parallel", "2", env=henv)
    assert r.code == 0, r.err
    run = _run(out)
    assert run["state"] == "complete" and run["run_id"] == first["run_id"] and run["parallel"] == 2
    assert [t["id"] for t in run["trials"]] == ["C7-cold-1", "M2-cold-1"]
    assert run["trials"][0] == first["trials"][0]  # kept as recorded, not run again
    assert run["trials"][1]["status"] == "done" and run["trials"][1]["pass"]
    assert calls.read_text().split() == ["C7", "M2", "M2"]
    assert run["resumed"][0]["kept"] == 1 and run["resumed"][0]["ran"] == 1
    assert (out / "trials" / "M2-cold-1.interrupted-1" / "home").is_dir()  # what the killed trial left, kept aside
    assert "Resumed after an interruption: 1 finished trial(s) kept, 1 run." in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text())["by_condition"]["cold"]["rate"] == 1

    # a complete run resumed runs nothing; one made under another methodology is refused
    r = panio_eval("run", "--resume", str(out / "run.json"), env=henv)
    assert r.code == 0 and calls.read_text().split() == ["C7", "M2", "M2"]
    data = _run(out)
    (tmp_path / "old.json").write_text(json.dumps({**data, "methodology": "0123456789abcdef"}))
    r = panio_eval("run", "--resume", str(tmp_path / "old.json"), env=henv)
    assert r.code == 2 and "methodology hash 0123456789abcdef" in r.err and "Traceback" not in r.err
    assert r.err.count("\n") == 2


def test_resume_runs_a_trial_whose_harness_failed_again_and_records_the_failure(panio_eval, env, tmp_path):
    out = tmp_path / "crashed"
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "M2", "--out", str(out),
                   env={**env, "FAKE_AGENT_CRASH": "2"})
    assert r.code == 0 and _run(out)["trials"][0]["status"] == "error"
    r = panio_eval("run", "--resume", str(out / "run.json"), env=env)
    assert r.code == 0, r.err
    t = _run(out)["trials"][0]
    assert t["status"] == "done" and t["pass"] and t["attempt"] == 2
    assert t["attempts"][0]["status"] == "error" and t["attempts"][0]["dir"] == "trials/M2-cold-1.attempt-1"


def test_regrade_grades_a_runs_recorded_answers_again_and_says_so(panio_eval, env, tmp_path):
    """A run graded by an older checker (here: its verdicts and methodology as an older one recorded them) is
    graded again from its trials' recorded streams, argv logs and lab end states; no agent runs."""
    out = tmp_path / "orig"
    judge = f"{sys.executable} {HERE / 'fake_judge.py'}"
    r = panio_eval("run", "--agent", "claude", "--n", "1", "--scenario", "C7", "M2", "--out", str(out),
                   "--judge", judge, env=env)
    assert r.code == 0, r.err
    run = _run(out)
    assert all(t["pass"] for t in run["trials"])
    # as an older checker left it: C7 (a T1 trial, graded on its lab end state) failed, under another methodology
    c7 = next(t for t in run["trials"] if t["id"] == "C7-cold-1")
    c7.update({"pass": False, "reasons": ["an older checker's reason"]})
    c7["checker"]["verdict"] = "fail"
    run["methodology"], run["catalog"] = "0ld0ld0ld0ld0ld0", "c0c0c0c0c0c0c0c0"
    (out / "run.json").write_text(json.dumps(run))
    calls = _calls(tmp_path)

    new = tmp_path / "regraded"
    r = panio_eval("regrade", str(out / "run.json"), "--out", str(new), env=env)
    assert r.code == 0, r.err
    assert _calls(tmp_path) == calls  # no agent ran
    again = _run(new)
    assert again["run_id"] != run["run_id"] and again["methodology"] == report.methodology_hash()
    src = again["regraded_from"]
    assert src["run_id"] == run["run_id"] and src["methodology"] == "0ld0ld0ld0ld0ld0" and src["trials"] == 2
    assert src["verdicts_changed"] == [{"id": "C7-cold-1", "before": False, "after": True}]
    assert src["judges"] == "kept as recorded"
    t = next(t for t in again["trials"] if t["id"] == "C7-cold-1")
    assert t["pass"] and t["t1"]["passed"] and t["regraded"]["before"]["pass"] is False
    assert t["judge"]["kept"] is True and t["judge"]["verdict"] is not None
    md = (new / "report.md").read_text()
    assert f"REGRADED: the recorded answers of run {run['run_id']}" in md
    assert "methodology 0ld0ld0ld0ld0ld0 → " + report.methodology_hash() in md
    assert "1 of 2 verdict(s) changed" in md and "C7-cold-1: fail → pass" in md
    assert f"Diff vs run {run['run_id']} (methodology differs: NOT comparable)" in md
    assert (out / "run.json").read_text() == json.dumps(run)  # the original is left as it was
    # a regraded run regrades again from the same recorded trials
    r = panio_eval("regrade", str(new / "run.json"), "--out", str(tmp_path / "twice"), env=env)
    assert r.code == 0 and _run(tmp_path / "twice")["regraded_from"]["verdicts_changed"] == []
    # without the trials it recorded there is nothing to grade: said in one line, exit 2
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "run.json").write_text(json.dumps(run))
    r = panio_eval("regrade", str(tmp_path / "alone" / "run.json"), env=env)
    assert r.code == 2 and "no recorded answer for 2 trial(s)" in r.err and r.err.count("\n") == 2


LIMITS = [("claude", "turns", "claude stopped at its turn limit"),
          ("claude", "tokens", "claude stopped at its spending limit"),
          ("gemini", "turns", "gemini exited 53: its turn limit was exceeded"),
          ("pi", "tokens", "pi's last reply stopped at its output-token limit"),
          ("codex", "tokens", "codex ran out of its context window")]


@pytest.mark.parametrize("agent,kind,reason", LIMITS, ids=[f"{a}-{k}" for a, k, _ in LIMITS])
def test_a_trial_that_hit_a_limit_is_reported_as_such_not_as_a_fail(panio_eval, env, tmp_path, agent, kind, reason):
    out = tmp_path / "limit"
    r = panio_eval("run", "--agent", agent, "--n", "2", "--scenario", "M2", "--out", str(out),
                   env={**env, "FAKE_AGENT_LIMIT": kind})
    assert r.code == 0, r.err
    for t in _run(out)["trials"]:
        assert t["status"] == "limit" and t["limit"] == kind and t["reason"].startswith(reason), t
        assert "pass" not in t and "scores" not in t
    agg = json.loads((out / "report.json").read_text())
    cell = agg["cells"]["M2"]["cold"]
    assert cell["limits"] == {kind: 2} and cell["errors"] == 0 and cell["rate"] is None
    assert cell["gap"].startswith(f"hit a limit ({kind}): {reason}")
    assert agg["by_condition"]["cold"]["harness_errors"] == 0 and agg["limits"] == {kind: 2}
    md = (out / "report.md").read_text()
    assert f"— (hit a limit ({kind})" in md and f"limits hit: {kind} 2" in md


def test_every_rate_has_a_wilson_interval_and_pass_k_its_spread(panio_eval, env, tmp_path):
    # known values: Wilson 95 % for 0/3, 2/3, 3/3; Newcombe 1998's example (56/70 vs 48/80: 0.0524 to 0.3339)
    assert stats.wilson(0, 3) == (0.0, 0.5615) and stats.wilson(2, 3) == (0.2077, 0.9385)
    assert stats.wilson(3, 3) == (0.4385, 1.0) and stats.wilson(0, 0) is None
    assert stats.newcombe(48, 80, 56, 70) == (0.0524, 0.3339)
    # two scenarios: M2 passes 3/3, C7 fails 3/3 (an invented command) under the same condition
    script = {"M2": {"mixed": SCRIPT["M2"]["good"]}, "C7": {"mixed": SCRIPT["C7"]["bad"]}}
    (tmp_path / "mixed.json").write_text(json.dumps(script))
    out = tmp_path / "ci"
    r = panio_eval("run", "--agent", "codex", "--n", "3", "--scenario", "C7", "M2", "--out", str(out),
                   env={**env, "FAKE_AGENT_SCRIPT": str(tmp_path / "mixed.json"), "FAKE_AGENT_MODE": "mixed"})
    assert r.code == 0, r.err
    agg = json.loads((out / "report.json").read_text())
    cold = agg["by_condition"]["cold"]
    assert cold["rate"] == 0.5 and cold["rate_ci"] == [0.1876, 0.8124]  # 3/6
    assert cold["invent_rate"] == 0.5 and cold["invent_rate_ci"] == [0.1876, 0.8124]
    assert agg["cells"]["M2"]["cold"]["rate_ci"] == [0.4385, 1.0] and agg["cells"]["C7"]["cold"]["rate_ci"] == [0.0, 0.5615]
    spread = cold["pass_hat_k_spread"]
    assert spread["3"] == {"mean": 0.5, "std": 0.5, "min": 0.0, "max": 1.0, "scenarios": 2}
    md = (out / "report.md").read_text()
    assert "| cold | 50% (6 trials) | 19–81% |" in md and "k=1: 50% ± 50, k=2: 50% ± 50, k=3: 50% ± 50" in md
    assert "| M2 | 100% (3/3, score 1.00 ± 0.00) [44–100%] |" in md
