"""The T1 (config-only) grader, seed §6.1.

Given a finished sandbox: allowlist check (a refused command fails the trial),
invented command/flag check, end-state assertions on lab.toml, exit-code check
(0, or the status the matching reference step expects), central trap
predicates. Every assertion gets its own verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scenarios.evidence import Command, Evidence
from scenarios.labcheck import check_assert, read_lab
from scenarios.matching import any_match, check_trap
from scenarios.meaning import mark_corrected
from scenarios.sandbox import Sandbox
from scenarios.roles import bind, role_of
from scenarios.scenario import Scenario
from scenarios.surface import Surface, parse


@dataclass
class Assertion:
    name: str
    passed: bool
    detail: str
    counts: bool = True  # False: reported, but does not decide the verdict

    def to_json(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, "counts": self.counts}


@dataclass
class T1Result:
    assertions: list[Assertion] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.assertions if a.counts)

    @property
    def failures(self) -> list[str]:
        return [f"{a.name}: {a.detail}" for a in self.assertions if a.counts and not a.passed]

    def to_json(self) -> dict:
        return {"passed": self.passed, "assertions": [a.to_json() for a in self.assertions]}


def evidence_from_records(records: list[dict]) -> Evidence:
    ev = Evidence()
    for r in records:
        c = Command(r["argv"], "run", exit=r.get("exit"), refused=bool(r.get("refused")))
        ev.commands.append(c)
        ev.shell.append(c.text)
    return ev


def grade(sc: Scenario, box: Sandbox, surface: Surface) -> T1Result:
    res = T1Result()
    records = box.records()
    ev = evidence_from_records(records)
    ev.commands = bind(ev.commands, surface, *role_of(sc, surface))
    mark_corrected(ev.commands, surface)  # a call that failed and was fixed at once is not held against it
    refused = [r for r in records if r.get("refused")]
    why = "; ".join(f"panio {' '.join(r['argv'])}: {r['refused']}" for r in refused)
    res.assertions.append(Assertion("allowlist", not refused, why or "every command T1-safe"))
    invented = [c.text for c in ev.commands
                if not c.is_help and not c.corrected and parse(surface, c.argv).status in ("invented_command", "invented_flag")]
    res.assertions.append(Assertion("invent", not invented, "; ".join(invented) or "only real commands and flags"))
    try:
        lab = read_lab(box.lab)
    except (OSError, ValueError) as exc:
        res.assertions.append(Assertion("lab-readable", False, f"{box.lab}: {exc}"))
        return res
    for a in sc.grader.get("assert", []):
        ok, why = check_assert(lab, a)
        res.assertions.append(Assertion(f"lab {a['path']}", ok, why))
    if sc.grader.get("unchanged"):
        same = box.lab.read_text(encoding="utf-8") == box.seed_text()
        res.assertions.append(Assertion("lab unchanged", same, "byte-identical" if same else "the lab file was modified"))
    if sc.grader.get("ran"):
        hit = [c.text for c in ev.commands if any_match(surface, sc.grader["ran"], c.argv)]
        res.assertions.append(Assertion("ran", bool(hit), ", ".join(hit) or f"none of {sc.grader['ran']}"))
    res.assertions.append(_exit_codes(sc, ev, surface))
    for trap in sc.traps:
        t = check_trap(surface, trap, ev, lab)
        if t.respected is not None:
            res.assertions.append(Assertion(f"trap {t.id}", t.respected, t.evidence, counts=t.central))
    if not [c for c in ev.commands if not c.is_help] and not sc.grader.get("unchanged"):
        res.assertions.append(Assertion("activity", False, "no panio command ran"))
    return res


def _exit_codes(sc: Scenario, ev: Evidence, surface: Surface) -> Assertion:
    bad: list[str] = []
    for c in ev.commands:
        if c.is_help or c.refused or c.corrected or c.exit in (0, None):
            continue
        step = next((s for s in sc.reference if any_match(surface, s.patterns(), c.argv)), None)
        if step is None or not step.exit_ok(c.exit):
            bad.append(f"{c.text} -> {c.exit}")
    return Assertion("exit codes", not bad, "; ".join(bad) or "all as expected")
