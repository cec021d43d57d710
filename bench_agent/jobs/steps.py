"""Run one job step: a panio command line as a subprocess, bounded in time, judged by its expectations.

The step runs ``panio --lab LAB ARGV...`` in its own process group with the
lease token in its environment, so the step's own dispatch can check the
lease (the fence) before any side effect. Output (stdout and stderr, in
order) is streamed to ``on_line`` and kept for the results database.
"""

from __future__ import annotations

import json
import re
from typing import Callable

VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
OUTPUT_LIMIT = 1_000_000
# Exit statuses that mean the lab failed rather than the board: the job is incomplete. 13 (refused) is
# the lab saying no: above all the host refusing a step whose lease was lost or broken.
LAB_EXITS = {3, 4, 5, 8, 9, 10, 11, 12, 13, 70}
# Every step's environment says when the job and the step before it began (epoch seconds), so
# `serial wait --since-step` needs no cursor bookkeeping.
JOB_STARTED_ENV, PREVIOUS_STEP_ENV = "PANIO_JOB_STARTED_AT", "PANIO_PREVIOUS_STEP_STARTED_AT"


def substitute(text: str, variables: dict[str, str]) -> str:
    return VAR_RE.sub(lambda m: variables.get(m.group(1), m.group(0)), text)


def command_line(step: dict, variables: dict[str, str]) -> str:
    """The step's command as it runs (or would have run) with ``variables``, for records and reports."""
    import shlex

    if "argv" not in step:  # a payload from an older panio carries only the command text
        return substitute(step.get("command", ""), variables)
    return "panio " + shlex.join(substitute(a, variables) for a in step["argv"])


def known_variables(job_id: int, target: str) -> dict[str, str]:
    """The variables every step has before any capture."""
    return {"target": target, "job_id": str(job_id)}


class StepProcess:
    """One running step (a ``bench_agent.process.Child``). ``wait`` returns (exit_status or None, why_stopped)."""

    def __init__(self, argv: list[str], env: dict[str, str], on_line: Callable[[str], None]) -> None:
        from bench_agent.process import Child

        # die_with_parent: a worker killed with -9 must not leave a step driving a board.
        self.child = Child(argv, env=env, merge_stderr=True, on_line=on_line, limit_bytes=OUTPUT_LIMIT,
                           die_with_parent=True)
        self.output = ""

    def wait(self, timeout_s: float, should_stop: Callable[[], str | None]) -> tuple[int | None, str | None]:
        """Wait for the exit; stop it early on timeout or when ``should_stop`` names a reason."""
        done = self.child.wait(timeout_s, should_stop)
        self.output = done.out
        return done.code, done.stopped


def error_of(output: str) -> dict | None:
    """The panio JSON error line a failed step printed last, if any."""
    for line in reversed(output.strip().splitlines()[-5:]):
        if line.startswith("{") and '"error"' in line:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "error" in obj:
                return obj
    return None


def judge(step: dict, exit_status: int, output: str, variables: dict[str, str]) -> tuple[list[dict], dict[str, str]]:
    """The checks of a finished step and the variables it captured."""
    expected = step.get("expect_exit", [0])
    checks = [{"check": f"exit status in {expected}", "ok": exit_status in expected, "got": exit_status}]
    if step.get("expect_output"):
        pattern = substitute(step["expect_output"], variables)
        checks.append(_match_check(f"output matches /{pattern}/", pattern, output, lambda m: m is not None)[0])
    if step.get("reject_output"):
        pattern = substitute(step["reject_output"], variables)
        checks.append(_match_check(f"output does not match /{pattern}/", pattern, output, lambda m: m is None)[0])
    captured: dict[str, str] = {}
    for var, pattern in step.get("capture", {}).items():
        check, m = _match_check(f"capture {var} from /{pattern}/", pattern, output, lambda m: m is not None)
        if check["ok"]:
            captured[var] = m.group(1) if m.groups() else m.group(0)
        checks.append({**check, "got": captured.get(var)})
    return checks, captured


def _match_check(name: str, pattern: str, output: str, ok) -> tuple[dict, object]:
    """One expectation on a step's output and its match; an invalid or too slow pattern fails it, saying why."""
    from bench_agent import patterns
    from bench_agent.errors import UsageError

    try:
        m = patterns.find(pattern, output)
    except UsageError as err:
        return {"check": name, "ok": False, "error": err.message}, None
    return {"check": name, "ok": ok(m)}, m
