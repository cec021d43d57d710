"""Grade one answer without running an agent: a final answer's text, or any adapter's event stream.

``panio-eval grade SCENARIO ANSWER_FILE`` and ``panio-eval calibrate --corpus``
use this. T0 answers go to the deterministic checker. T1 answers are replayed:
the panio commands the stream ran (or, for a plain text answer, the commands it
states) go through the argv shim of a fresh sandbox seeded from the scenario's
fixture, in order, so the T1 grader reads a real end state and real exit
statuses, exactly as in a trial. (Replay runs argv, not a shell: a command
built from shell variables or loops is replayed as written.)
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from scenarios import checker, t1
from scenarios.adapters import sniff
from scenarios.evidence import Evidence
from scenarios.sandbox import Sandbox
from scenarios.scenario import Scenario
from scenarios.surface import Surface

REFUSED_EXIT = 13


@dataclass
class Graded:
    """One answer's grade: the verdict, the rubric scores and the evidence behind them."""

    scenario: str
    condition: str
    verdict: str  # pass | fail | undetermined
    scores: dict
    reasons: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    traps: list[dict] = field(default_factory=list)
    check: dict = field(default_factory=dict)
    t1: dict | None = None

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "condition": self.condition, "verdict": self.verdict,
                "scores": self.scores, "reasons": self.reasons, "invented": self.invented,
                "traps": self.traps, "checker": self.check, "t1": self.t1}


def evidence_of(text: str) -> Evidence:
    """An event stream of any known harness, else a plain final answer."""
    return sniff(text)


def replay(ev: Evidence, box: Sandbox, groups: list[str] | None = None) -> None:
    """Run the answer's panio commands through the sandbox shim, recording each exit status.

    A text answer's commands are replayed as stated, except a runtime command it only names in prose
    ("from now on `panio power-cycle pico` cuts the power"): that says what the configuration is for,
    it is not a step the answer takes (a block's line, or one the agent ran, is replayed and refused)."""
    from scenarios.safe import classify

    ran = [c for c in ev.acted if c.source == "run"]
    todo = ran or [c for c in ev.acted if c.source == "stated"
                   and not (c.inline and classify(c.argv, set(groups or [])) is not None)]
    for c in todo:
        if c.is_help:
            continue
        r = box.run_panio(c.argv)
        c.exit = r.returncode
        c.output = c.output or (r.stdout + r.stderr)  # what panio prints on this lab (a stream's own output first)
        c.refused = r.returncode == REFUSED_EXIT and "refused by panio-eval" in r.stderr
        if c.source == "stated":
            c.source = "run"


def grade(sc: Scenario, ev: Evidence, surface: Surface, condition: str = "cold",
          groups: list[str] | None = None, workdir: Path | None = None) -> Graded:
    """Checker verdict for one answer; T1 answers are replayed in a sandbox first."""
    t1_res, lab = None, None
    if ev.mcp_calls:  # stated or run tool calls are graded as the commands they stand for, as `run` does
        from scenarios.mcpmap import add_calls

        add_calls(ev, surface)
    if sc.tier == "t1":
        from scenarios.labcheck import read_lab

        with tempfile.TemporaryDirectory(prefix="panio-eval-grade-", dir=workdir) as tmp:
            box = Sandbox(Path(tmp) / "box").create(sc.fixture_lab, groups or [])
            replay(ev, box, groups)
            t1_res = t1.grade(sc, box, surface)
            try:  # the end state decides the lab traps, as in a trial (runner.score)
                lab = read_lab(box.lab)
            except (OSError, ValueError):
                lab = None
    res = checker.check(sc, ev, surface, condition, lab=lab)
    scores, reasons, verdict = dict(res.scores), list(res.reasons), res.verdict
    if t1_res is not None:
        scores["d6"] = 2 if t1_res.passed and not res.contradictions else 0  # a claim panio's output belies
        verdict, reasons = checker.verdict(scores, res.traps, condition)
        if res.contradictions:
            verdict, reasons = "fail", res.contradictions + reasons
        if not t1_res.passed:
            verdict, reasons = "fail", reasons + t1_res.failures
    return Graded(sc.id, condition, verdict, scores, reasons, res.invented, [t.to_json() for t in res.traps],
                  res.to_json(), t1_res.to_json() if t1_res else None)
