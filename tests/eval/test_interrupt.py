"""Issue 40: a panio-eval run stopped by SIGTERM or SIGINT stops every agent it started (the agent's whole
process group: a tool the agent started too), records the trials that were running as interrupted, and
`--resume` runs them again. The agents are the scripted fake (tests/eval/fake_agent.py) printing Claude Code's
real event stream, hanging before its answer with a `sleep` of its own."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench_agent.procinfo import pid_alive

BIN = Path(sys.executable).parent
SCRIPT = {"C4": {"good": {"run": ["panio config show"], "answer": "pico has a serial console; `panio config show`."}}}


def _wait(cond, deadline_s: float, what: str):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_leaves_no_agent_running_and_resumes(eval_env, fake_agents, tmp_path, sig):
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    pids = tmp_path / "pids"
    env = {**eval_env, "PATH": f"{fake_agents}:{eval_env['PATH']}", "FAKE_AGENT_SCRIPT": str(tmp_path / "script.json"),
           "FAKE_AGENT_MODE": "good"}
    out = tmp_path / "run"
    argv = [str(BIN / "panio-eval"), "run", "--agent", "claude", "--n", "2", "--parallel", "2", "--scenario", "C4",
            "--out", str(out), "--timeout-s", "300"]
    p = subprocess.Popen(argv, env={**env, "FAKE_AGENT_HANG": "1", "FAKE_AGENT_PIDS": str(pids)}, cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        lines = _wait(lambda: pids.exists() and len(pids.read_text().splitlines()) == 2 and pids.read_text().splitlines(),
                      90, "both agents to hang")
        started = [int(x) for line in lines for x in line.split()]  # each agent and the sleep it started
        assert all(pid_alive(x) for x in started)
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    assert "trial(s) recorded as interrupted" in err and "--resume" in err and "Traceback" not in err, err
    assert [x for x in started if pid_alive(x)] == []  # gone when panio-eval is: agents and what they started
    run = json.loads((out / "run.json").read_text())
    assert run["state"] == "interrupted"
    assert sorted((t["id"], t["status"]) for t in run["trials"]) == [("C4-cold-1", "interrupted"), ("C4-cold-2", "interrupted")]
    assert all("pass" not in t and "scores" not in t for t in run["trials"])  # not graded: not a fail
    r = subprocess.run([str(BIN / "panio-eval"), "run", "--resume", str(out / "run.json"), "--json"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["state"] == "complete" and [t["status"] for t in run["trials"]] == ["done", "done"], run["trials"]
    assert (out / "trials" / "C4-cold-1.interrupted-1" / "stream.jsonl").is_file()  # the stopped attempt, kept
