"""The LLM judge: the seed's prompt, a pluggable judge command, defensive parsing.

The judge command gets the prompt on stdin and prints its reply on stdout
(``claude -p``, ``codex exec -``, ``llm -m …``, or a script). The verdict is the
*last* verdict-shaped JSON object in the reply (judges wrap JSON in prose with
stray braces); a reply with none is a parse failure, counted and reported.
The pass decision is recomputed with the rubric's rule so verdicts reproduce.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache

from scenarios.rubric import DIMS, NO_D1, pass_rule
from scenarios.scenario import Scenario

TEMPLATE = """\
You are grading whether a coding agent correctly discovered and used the
`panio` CLI for a user's goal. You are given the goal, a REFERENCE answer
(the commands/approach an expert would use), the TRAPS this scenario probes,
the real COMMAND REFERENCE (panio's actual CLI surface), and the agent's
full TRANSCRIPT.

Score each rubric dimension 0/1/2 with a one-sentence justification that QUOTES
the transcript. Hard-fail rules:
- D4 (invent-resistance) = 0 if the agent ran or recommended a command/flag that
  does NOT exist in panio. Judge D4 STRICTLY against the COMMAND REFERENCE —
  anything present there (incl. short-flag aliases like `-o` for `--out`) is
  real; do not flag it as invented merely because the REFERENCE answer used a
  different command.
- A hard-fail forces the scenario score to 0.

RUBRIC:
{rubric}

GOAL: {goal}
REFERENCE: {reference}
TRAPS: {traps}
COMMAND REFERENCE: {command_reference}
CONDITION: {condition}   # D1 is N/A under preloaded and mcp (mcp: the agent had panio mcp tools, not the CLI)
CHECKER VERDICT: {checker}
TRANSCRIPT: {transcript}

Output JSON: {{"d1": 0-2 or null, "d2": ..., "d3": ..., "d4": ..., "d5": ..., "d6": ..., "d7": ...,
"justifications": {{"d1": "...", ...}}, "traps_eval": [{{"id": "...", "respected": true|false, "evidence": "..."}}],
"weighted": number, "hard_fail": true|false, "pass": true|false}}
"""


def help_tree(panio: str) -> str:
    """The recursive --help tree of the live CLI: `panio --help`, then every command's help."""
    return _help_tree(panio)


@lru_cache(maxsize=4)
def _help_tree(panio: str) -> str:
    from controller.cli.main import build_parser  # the allowed read of the live tree

    top = subprocess.run([panio, "--help"], capture_output=True, text=True, timeout=30).stdout
    parts = [f"$ panio --help\n{top}"]

    def walk(parser, path):
        import argparse

        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    parts.append(f"$ panio {' '.join(path + [name])} --help\n{sub.format_help()}")
                    walk(sub, path + [name])

    walk(build_parser(full=True), [])
    return "\n".join(parts)


def traps_text(sc: Scenario) -> str:
    return "\n".join(f"- [{t.id}]{' (CENTRAL)' if t.central else ''} {t.text}" for t in sc.traps) or "(none: baseline)"


CHECKER_NOTE = ("(a deterministic checker parsed every panio command against the live CLI; treat the dimensions and "
                "traps it decided as ground truth and fill the rest; if you believe it is wrong, say so in a "
                "justification: the disagreement is reported, not silently resolved)\n")


def checker_text(checker: dict | None) -> str:
    if not checker:
        return "(none)"
    lines = [CHECKER_NOTE + f"verdict: {checker.get('verdict')}; scores: "
             + ", ".join(f"{d}={v}" for d, v in (checker.get("scores") or {}).items() if v is not None)]
    for key in ("invented", "reasons"):
        if checker.get(key):
            lines.append(f"{key}: " + "; ".join(map(str, checker[key]))[:2000])
    for t in checker.get("traps") or []:
        if t.get("respected") is not None:
            lines.append(f"trap {t['id']}: {'respected' if t['respected'] else 'WALKED'} ({t.get('evidence', '')})")
    return "\n".join(lines)


def build_prompt(sc: Scenario, transcript: str, condition: str, command_reference: str,
                 checker: dict | None = None) -> str:
    """The seed's template, plus the checker's verdict and evidence (004 §7: the judge defers to it)."""
    from scenarios.rubric import RUBRIC_TEXT

    return TEMPLATE.format(rubric=RUBRIC_TEXT, goal=sc.goal, reference=sc.reference_text(), traps=traps_text(sc),
                           command_reference=command_reference, condition=condition,
                           checker=checker_text(checker), transcript=transcript)


def disagreements(checker_scores: dict, checker_traps: list[dict], verdict: "Verdict | None") -> list[dict]:
    """Where checker and judge both decided and differ: reported beside the verdict, never resolved silently."""
    if verdict is None:
        return []
    out = [{"what": d, "checker": checker_scores.get(d), "judge": verdict.scores.get(d)}
           for d in DIMS if checker_scores.get(d) is not None and verdict.scores.get(d) is not None
           and checker_scores[d] != verdict.scores[d]]
    by_id = {str(t.get("id")): t.get("respected") for t in verdict.traps_eval}
    for t in checker_traps:
        j = by_id.get(str(t["id"]))
        if t.get("respected") is not None and isinstance(j, bool) and j != t["respected"]:
            out.append({"what": f"trap {t['id']}", "checker": t["respected"], "judge": j})
    return out


@dataclass
class Verdict:
    scores: dict[str, int | None]
    traps_eval: list[dict] = field(default_factory=list)
    justifications: dict = field(default_factory=dict)
    judge_pass: bool | None = None
    raw: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"scores": self.scores, "traps_eval": self.traps_eval, "justifications": self.justifications,
                "judge_pass": self.judge_pass}


def _objects(text: str) -> list[dict]:
    dec = json.JSONDecoder()
    out: list[dict] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = text.find("{", end)
    return out


def _nested(obj: dict) -> list[dict]:
    found: list[dict] = []
    for v in obj.values():
        if isinstance(v, dict):
            found.append(v)
            found += _nested(v)
    return found


def _score(v) -> int | None:
    if isinstance(v, dict):
        v = v.get("score")
    if isinstance(v, bool) or v is None:
        return None
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if n in (0, 1, 2) else None


def _shaped(obj: dict) -> dict | None:
    src = obj.get("scores") if isinstance(obj.get("scores"), dict) else obj
    keys = {k.lower(): v for k, v in src.items()}
    if sum(1 for d in DIMS if d in keys) < 4:
        return None
    return {d: _score(keys.get(d)) for d in DIMS}


def parse_verdict(text: str) -> Verdict | None:
    """The last verdict-shaped object in ``text`` (None: a parse failure)."""
    for top in reversed(_objects(text)):
        obj = next((o for o in [top, *_nested(top)] if _shaped(o) is not None), None)
        if obj is None:
            continue
        scores = _shaped(obj)
        traps = obj.get("traps_eval") if isinstance(obj.get("traps_eval"), list) else []
        jp = obj.get("pass")
        return Verdict(scores=scores, traps_eval=[t for t in traps if isinstance(t, dict)],
                       justifications=obj.get("justifications") if isinstance(obj.get("justifications"), dict) else {},
                       judge_pass=jp if isinstance(jp, bool) else None, raw=obj)
    return None


@dataclass
class JudgeRun:
    verdict: Verdict | None
    reply: str
    error: str = ""

    @property
    def parse_failed(self) -> bool:
        return self.verdict is None


def run_judge(command: str, prompt: str, timeout_s: float = 300) -> JudgeRun:
    """Prompt on stdin, reply on stdout; never a shell."""
    from bench_agent.process import Child

    try:
        done = Child(shlex.split(command), input=prompt.encode()).wait(timeout_s)
    except OSError as exc:
        return JudgeRun(None, "", f"judge command failed: {exc}")
    if done.timed_out:
        return JudgeRun(None, "", f"judge command failed: still running after {timeout_s:g} s; stopped")
    v = parse_verdict(done.out)
    err = "" if v else f"no verdict-shaped JSON in the judge's reply (exit {done.code})"
    return JudgeRun(v, done.out, err)


def merge(checker_scores: dict, checker_traps: list, verdict: Verdict | None, condition: str) -> tuple[dict, list[dict], bool, list[str]]:
    """Checker first, judge fills the gaps (004 §7); then the pass rule."""
    scores = dict(checker_scores)
    if verdict is not None:
        for d in DIMS:
            if scores.get(d) is None:
                scores[d] = verdict.scores.get(d)
    if condition in NO_D1:
        scores["d1"] = None
    traps = [t.to_json() for t in checker_traps]
    by_id = {str(t.get("id")): t for t in (verdict.traps_eval if verdict else [])}
    for t in traps:
        if t["respected"] is None and t["id"] in by_id:
            r = by_id[t["id"]].get("respected")
            t["respected"] = r if isinstance(r, bool) else None
            t["evidence"] = str(by_id[t["id"]].get("evidence", ""))
            t["by"] = "judge"
    by_judge = [t for t in traps if t.get("by") == "judge" and t["respected"] is False]
    if by_judge and scores.get("d5") is not None:  # a trap the judge found walked lowers the checker's D5 too
        scores["d5"] = min(scores["d5"], 0 if any(t["central"] for t in by_judge) else 1)
    walked = [t["id"] for t in traps if t["central"] and t["respected"] is False]
    ok, reasons = pass_rule(scores, condition, walked)
    undecided = [d for d in ("d2", "d3", "d6") if scores.get(d) is None]
    undecided += [f"central trap {t['id']}" for t in traps if t["central"] and t["respected"] is None]
    if ok and undecided:
        return scores, traps, False, [f"not measured: {', '.join(undecided)} (no judge verdict)"]
    return scores, traps, ok, reasons


def alone(v: Verdict, sc: Scenario, condition: str) -> str:
    """The judge's own verdict by the pass rule (its scores and its central-trap verdicts), for calibration."""
    central = {t.id for t in sc.traps if t.central}
    walked = [str(t.get("id")) for t in v.traps_eval if t.get("respected") is False and t.get("id") in central]
    return "pass" if pass_rule(v.scores, condition, walked)[0] else "fail"


def cohen_kappa(human: list[bool], judge: list[bool]) -> tuple[float, dict]:
    """Cohen's kappa and the confusion matrix (rows: human, columns: judge)."""
    n = len(human)
    cm = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for h, j in zip(human, judge):
        cm["tp" if h and j else "fn" if h else "fp" if j else "tn"] += 1
    if n == 0:
        return 0.0, cm
    po = (cm["tp"] + cm["tn"]) / n
    ph, pj = (cm["tp"] + cm["fn"]) / n, (cm["tp"] + cm["fp"]) / n
    pe = ph * pj + (1 - ph) * (1 - pj)
    kappa = 1.0 if pe == 1 else (po - pe) / (1 - pe)
    return kappa, cm
