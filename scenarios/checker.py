"""The T0 deterministic checker: rubric dimensions from evidence, no LLM.

Every ``panio`` command the agent ran or stated is parsed against the live
tree (D4 invented command/flag, D3 formation incl. the -t vs positional
convention), matched in order against the reference (D2 capability, D6 goal),
and the traps' predicates are evaluated (D5). D1 (discovery) and D7
(efficiency) come from the event stream when there is one. A dimension the
checker cannot decide stays ``None`` for the judge to fill.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import copy
from dataclasses import replace as dc_replace

from scenarios import meaning

from scenarios.evidence import Command, Evidence
from scenarios.matching import TrapResult, any_match, check_trap
from scenarios.roles import bind, role_of
from scenarios.rubric import DIMS, NO_D1, pass_rule
from scenarios.scenario import Scenario
from scenarios.surface import Surface, parse

INVENTED = ("invented_command", "invented_flag")


@dataclass
class CheckResult:
    scores: dict[str, int | None]
    traps: list[TrapResult]
    invented: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    matched: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)  # what a command means against what the answer says
    unsettled: list[str] = field(default_factory=list)  # what the answer leaves open (the judge decides)
    verdict: str = "undetermined"  # pass | fail | undetermined (a judge must decide)
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"scores": self.scores, "traps": [t.to_json() for t in self.traps], "invented": self.invented,
                "malformed": self.malformed, "matched": self.matched, "unmatched": self.unmatched,
                "notes": self.notes, "contradictions": self.contradictions, "unsettled": self.unsettled,
                "verdict": self.verdict, "reasons": self.reasons}


def check(sc: Scenario, ev: Evidence, surface: Surface, condition: str = "cold", lab: dict | None = None) -> CheckResult:
    role, fixed = role_of(sc, surface)
    ev = copy.copy(ev)
    ev.commands = [dc_replace(c) for c in bind(ev.commands, surface, role, fixed)]  # the target is a role
    meaning.mark_corrected(ev.commands, surface)  # a failed call fixed at once is not graded
    ev.commands = meaning.expand(ev.commands, sc, surface)  # off + on means power-cycle, where the traps allow
    cmds = [c for c in ev.acted if parse(surface, c.argv, strict=False).status != "shorthand"]
    given = [c for c in cmds if not c.means]  # what the agent wrote, without the commands equivalences made
    res = CheckResult(scores={d: None for d in DIMS}, traps=[check_trap(surface, t, ev, lab) for t in sc.traps])
    _invent_and_form(res, given, surface, ev.hooks)
    refused = [c.problem for c in ev.commands if c.problem and not c.rejected]  # a call panio's MCP server refuses
    if refused:
        res.malformed += refused
        res.scores["d3"] = min(res.scores["d3"] or 0, 1) if len(refused) < len(given) else 0
    passing = meaning.flags_in_passing(ev, surface)
    if passing:
        res.invented += [f"{x} (named in passing)" for x in passing]
        res.scores["d4"] = 0
    _reference(res, sc, cmds, surface)
    _meaning(res, sc, ev, given, surface)
    _gotchas(res)
    if ev.from_stream:
        _discovery(res, ev, condition)
        _efficiency(res, ev)
    if condition in NO_D1:
        res.scores["d1"] = None
    res.verdict, res.reasons = verdict(res.scores, res.traps, condition)
    if res.verdict != "pass":
        res.reasons = res.contradictions + res.reasons + (res.unsettled if res.verdict == "undetermined" else [])
    return res


def _meaning(res: CheckResult, sc: Scenario, ev: Evidence, given: list[Command], surface: Surface) -> None:
    """Units against what the answer says, and results claimed from failed commands: a contradiction is a
    goal not met (D6 = 0, which no judge can lift); a unit left open leaves D3 to the judge."""
    wrong, open_ = meaning.units(sc, ev, given, surface)
    claims = meaning.failed_claims(sc, ev, surface) if sc.tier == "t0" else []
    claims += meaning.printed_claims(sc, ev, surface)  # what it says panio printed, against what panio printed
    refused = [f"panio would refuse {x}" for x in res.malformed]  # it does nothing: no goal reached through it
    res.contradictions += wrong + claims + refused
    if res.contradictions:
        res.scores["d6"] = 0
    elif open_:
        res.unsettled += open_
        res.scores["d3"] = None


def _mention(c: Command, p) -> bool:
    """Prose naming a command without its arguments ("`panio serial send` needs the watch"): not an invocation."""
    return c.inline and p.status == "malformed" and len(c.argv) == len(p.path)


def is_help(surface: Surface, c: Command) -> bool:
    """Reads help, runs nothing (`panio helper NAME --help` runs the helper: its --help is the helper's)."""
    return not c.argv or parse(surface, c.argv, strict=False).status == "help"


def _invent_and_form(res: CheckResult, cmds: list[Command], surface: Surface, hooks: list[Command]) -> None:
    real = [c for c in cmds if not is_help(surface, c)]
    for h in hooks:  # a hook line that would call an invented panio command is an invention too
        p = parse(surface, h.argv)
        if p.status in INVENTED:
            res.invented.append(f"{h.text} (in a hook): {p.problem}")
    bad_form = 0
    for c in cmds:
        p = parse(surface, c.argv)
        if p.status in INVENTED and not is_help(surface, c):
            res.invented.append(f"{c.text}: {p.problem}")
        elif p.status in ("convention", "malformed") and not _mention(c, p):
            res.malformed.append(f"{c.text}: {p.problem}")
            bad_form += 1
    res.scores["d4"] = 0 if res.invented else 2
    formed = [c for c in real if parse(surface, c.argv).status not in INVENTED]
    if not formed:
        res.scores["d3"] = 2 if not res.invented else 0
    else:
        share = 1 - bad_form / len(formed)
        res.scores["d3"] = 2 if share == 1 else (1 if share >= 0.5 else 0)


def _reference(res: CheckResult, sc: Scenario, cmds: list[Command], surface: Surface) -> None:
    required = [s for s in sc.reference if not s.optional]
    real = [c for c in cmds if not is_help(surface, c)]
    if not required:
        goal_traps = [t for t in res.traps if t.respected is not None]
        if goal_traps:
            ok = all(t.respected for t in goal_traps)
            res.scores["d2"] = res.scores["d6"] = 2 if ok else 0
        return
    # capability: each step's command path (or an alternative's) appears at all
    have_paths = {parse(surface, c.argv, strict=False).path for c in real}
    met = sum(1 for s in required if any(parse(surface, p, strict=False).path in have_paths for p in s.patterns()))
    share = met / len(required)
    res.scores["d2"] = 2 if share == 1 else (1 if share >= 0.5 else 0)
    # goal: every required step matched, in order (one command may satisfy consecutive steps:
    # `serial transact` both sends and reads the reply); the steps of one group in any order among themselves
    pos, last, in_order = 0, None, True
    for block in _blocks(required):
        end = None
        for step in block:
            hit = _find(surface, step, real, pos)
            if hit is None and len(block) == 1 and last is not None and _find(surface, step, real, last) == last:
                hit = last
            if hit is None:
                anywhere = _find(surface, step, real, 0)
                if anywhere is None:
                    res.unmatched.append(step.cmd)
                    continue
                in_order = False
                res.matched.append(f"{step.cmd} (out of order)")
            else:
                res.matched.append(step.cmd)
                end = hit if end is None else max(end, hit)
        if end is not None:
            pos, last = end + 1, end
    if res.unmatched:
        res.scores["d6"] = 0
    else:
        res.scores["d6"] = 2 if in_order else 1


def _blocks(steps: list) -> list[list]:
    """Consecutive steps of one group form a block; every other step is a block of its own."""
    out: list[list] = []
    for s in steps:
        if s.group and out and out[-1][0].group == s.group:
            out[-1].append(s)
        else:
            out.append([s])
    return out


def _find(surface: Surface, step, cmds: list[Command], start: int) -> int | None:
    pats = step.patterns()
    for i in range(start, len(cmds)):
        if any_match(surface, pats, cmds[i].argv):
            return i
    return None


def _gotchas(res: CheckResult) -> None:
    decided = [t for t in res.traps if t.respected is not None]
    if not decided:
        return
    if any(t.central and not t.respected for t in decided):
        res.scores["d5"] = 0
    elif any(not t.respected for t in decided):
        res.scores["d5"] = 1
    else:
        res.scores["d5"] = 2


def _discovery(res: CheckResult, ev: Evidence, condition: str) -> None:
    runs = [c for c in ev.commands if c.source == "run"]
    first_act = next((i for i, c in enumerate(runs) if not c.is_learning), len(runs))
    looked = any(c.is_learning for c in runs[:first_act]) or bool(ev.reads)
    looked_late = any(c.is_learning for c in runs)
    res.scores["d1"] = 2 if looked else (1 if looked_late else 0)


def _efficiency(res: CheckResult, ev: Evidence) -> None:
    runs = [c for c in ev.commands if c.source == "run"]
    failed = sum(1 for c in runs if c.exit not in (0, None) and not c.is_help)
    helps = sum(1 for c in runs if c.is_learning)
    waste = failed + max(0, helps - 8)
    res.scores["d7"] = 2 if waste == 0 else (1 if waste <= 2 else 0)
    if failed:
        res.notes.append(f"{failed} panio command(s) exited non-zero")


def verdict(scores: dict, traps: list[TrapResult], condition: str) -> tuple[str, list[str]]:
    """pass/fail when the evidence decides it, else undetermined (the judge fills the gaps)."""
    walked = [t.id for t in traps if t.central and t.respected is False]
    ok, reasons = pass_rule(scores, condition, walked)
    if not ok:
        return "fail", reasons
    if any(scores[d] is None for d in ("d2", "d3", "d6")):
        return "undetermined", ["D2/D3/D6 need a judge"]
    open_central = [t.id for t in traps if t.central and t.respected is None]
    if open_central:  # walking into a central trap fails the trial: one nobody decided leaves it open
        return "undetermined", [f"central trap {', '.join(open_central)} needs a judge"]
    return "pass", reasons
