"""The golden self-test: references pass their own graders, known-bad variants fail.

T1 scenarios run for real: a sandbox is seeded, the reference (or bad) commands
go through the argv shim, the T1 grader reads the end state. T0 scenarios feed
the reference (or bad) answer to the T0 checker. A scenario whose reference
needs a command panio lacks is *pending* (named), never passed.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scenarios import checker, t1
from scenarios.drift import Guard
from scenarios.evidence import Evidence
from scenarios.sandbox import Sandbox
from scenarios.scenario import Scenario
from scenarios.surface import Surface


@dataclass
class Outcome:
    scenario: str
    variant: str  # "reference" or the bad variant's id
    status: str  # pass | fail | pending | undetermined
    expected: str  # what the self-test wants: pass (reference) or fail (bad)
    detail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.status == "pending":
            return True
        return self.status == "pass" if self.expected == "pass" else self.status != "pass"

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "variant": self.variant, "status": self.status,
                "expected": self.expected, "ok": self.ok, "detail": self.detail}


def reference_answer(sc: Scenario) -> str:
    lines = [s.cmd for s in sc.reference]
    block = "```\n" + "\n".join(lines) + "\n```\n" if lines else ""
    return block + sc.reference_prose


def run_t1(sc: Scenario, commands: list[str], root: Path, groups: list[str], surface: Surface) -> t1.T1Result:
    from scenarios.scenario import panio_argv

    box = Sandbox(root).create(sc.fixture_lab, groups)
    for cmd in commands:
        box.run_panio(panio_argv(cmd))
    return t1.grade(sc, box, surface)


def one(sc: Scenario, variant: str, guard: Guard, surface: Surface, tmp: Path, pending: dict) -> Outcome:
    expected = "pass" if variant == "reference" else "fail"
    if sc.id in pending:
        return Outcome(sc.id, variant, "pending", expected, [f"needs: {', '.join(pending[sc.id])}"])
    bad = next((b for b in sc.bad if b.id == variant), None)
    if sc.tier == "t1":
        if bad is None:
            cmds = [s.cmd for s in sc.reference
                    if s.tier == "t1" and not (s.optional and guard.missing(s.argv))]
        else:
            cmds = bad.commands or [" ".join(["panio", *c.argv]) for c in _answer(bad.answer).commands]
        res = run_t1(sc, cmds, tmp / f"{sc.id}-{variant}", guard.groups(), surface)
        return Outcome(sc.id, variant, "pass" if res.passed else "fail", expected, res.failures)
    ev = _answer(reference_answer(sc) if bad is None else (bad.answer or "```\n" + "\n".join(bad.commands) + "\n```"))
    res = checker.check(sc, ev, surface, condition="preloaded")
    return Outcome(sc.id, variant, res.verdict, expected, res.reasons + res.invented)


def _answer(text: str) -> Evidence:
    ev = Evidence()
    ev.add_answer(text)
    return ev


def run(scenarios: list[Scenario], bad: bool = True, planned: bool = False, jobs: int = 4) -> list[Outcome]:
    """Every reference (and, with ``bad``, every known-bad variant) through its grader."""
    guard = Guard()
    surface = guard.planned if planned else guard.live
    pending = guard.run(scenarios).pending
    if planned:  # T0 scenarios can be previewed against the announced surface; T1 ones must run for real
        tiers = {s.id: s.tier for s in scenarios}
        pending = {sid: missing for sid, missing in pending.items() if tiers[sid] == "t1"}
    work = [(sc, "reference") for sc in scenarios]
    if bad:
        work += [(sc, b.id) for sc in scenarios for b in sc.bad]
    with tempfile.TemporaryDirectory(prefix="panio-eval-") as tmp:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(lambda w: one(w[0], w[1], guard, surface, Path(tmp), pending), work))
