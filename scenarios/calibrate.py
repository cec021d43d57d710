"""Calibration against human labels: Cohen's kappa, the confusion matrix, the disagreements.

Two sources of labels:

* a labelled corpus (``--corpus corpus.toml``): answers with a human verdict,
  graded here by the checker alone, the judge alone (``--judge``) and the
  combination, reported per split (``dev`` may be looked at while changing the
  checker, ``holdout`` is only measured) and per answer class. A label may be
  ``undetermined`` (the answer alone cannot settle it: the judge must): a corpus
  with such labels is measured over three categories (pass, fail, undetermined),
  and a checker pass on an answer humans did not pass is counted as a false pass.
  An answer may carry ``ran`` (the commands it ran, with exit and output): it is
  graded as the Claude Code event stream those make (``stream_of``);
* a run (``--labels human.jsonl --run run.json``): trial ids with a human verdict,
  compared with the verdicts the run recorded.

A grader that did not run is named as such in the header, never reported as 0.
"""

from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scenarios import grade, judge
from scenarios.rubric import pass_rule
from scenarios.scenario import EvalUsage, Scenario


@dataclass
class Entry:
    id: str
    scenario: str
    condition: str
    split: str
    human: bool
    reason: str
    classes: list[str]
    text: str
    label: str = ""  # pass | fail | undetermined (the human's); "" = pass/fail from ``human``

    def __post_init__(self) -> None:
        self.label = self.label or ("pass" if self.human else "fail")

    @classmethod
    def load_all(cls, corpus: Path) -> list["Entry"]:
        with open(corpus, "rb") as f:
            raw = tomllib.load(f)["answer"]
        out = []
        for a in raw:
            if a["verdict"] not in LABELS:
                raise EvalUsage(f"panio-eval calibrate: {corpus.name}: {a.get('id')}: verdict must be one of "
                                f"{', '.join(LABELS)}, not {a['verdict']!r}")
            text = a["text"] if "text" in a else (corpus.parent / a["file"]).read_text(encoding="utf-8")
            if "ran" in a:
                text = stream_of(a["ran"], text)
            out.append(cls(a["id"], a["scenario"], a.get("condition", "cold"), a.get("split", "dev"),
                           a["verdict"] == "pass", a.get("reason", ""), a.get("classes", []), text, a["verdict"]))
        return out


LABELS = ("pass", "fail", "undetermined")


def stream_of(ran: list[dict], answer: str) -> str:
    """The Claude Code event stream (stream-json) of an agent that ran ``ran`` (``cmd``, ``exit``, ``out``)
    in order and then answered ``answer``: a corpus entry's transcript, graded as a trial's stream is."""
    import json

    lines = [{"type": "system", "subtype": "init", "session_id": "corpus", "tools": ["Bash", "Read"], "model": "corpus"}]
    for i, r in enumerate(ran):
        tid = f"toolu_{i:02d}"
        lines.append({"type": "assistant", "message": {"id": f"msg_{i:02d}", "role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": r["cmd"]}}]}})
        lines.append({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": r.get("out", ""), "is_error": r.get("exit", 0) != 0}]}})
    lines.append({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(ran) + 1,
                  "result": answer})
    return "\n".join(json.dumps(x) for x in lines) + "\n"


@dataclass
class Agreement:
    """Agreement of one grader with the humans over a set of answers."""

    n: int = 0
    kappa: float | None = None
    accuracy: float | None = None
    confusion: dict = field(default_factory=dict)
    undetermined: int = 0

    def to_json(self) -> dict:
        return {"n": self.n, "kappa": self.kappa, "accuracy": self.accuracy, "confusion": self.confusion,
                "undetermined": self.undetermined}


def agreement(human: list[bool], verdicts: list[str]) -> Agreement:
    """An undetermined verdict counts as a fail (no score can be published without a decision)."""
    got = [v == "pass" for v in verdicts]
    k, cm = judge.cohen_kappa(human, got)
    n = len(human)
    acc = (cm["tp"] + cm["tn"]) / n if n else None
    return Agreement(n, round(k, 4) if n else None, round(acc, 4) if acc is not None else None, cm,
                     sum(1 for v in verdicts if v == "undetermined"))


def agreement3(human: list[str], verdicts: list[str]) -> dict:
    """Cohen's kappa over pass / fail / undetermined, the 3x3 confusion matrix (human -> grader -> count) and
    the false passes (the grader passed what humans did not)."""
    n = len(human)
    cm = {h: {g: 0 for g in LABELS} for h in LABELS}
    for h, v in zip(human, verdicts):
        cm[h][v if v in LABELS else "undetermined"] += 1
    if not n:
        return {"n": 0, "kappa": None, "accuracy": None, "confusion": cm, "false_pass": 0, "undetermined": 0}
    po = sum(cm[c][c] for c in LABELS) / n
    pe = sum(sum(cm[c].values()) * sum(cm[h][c] for h in LABELS) for c in LABELS) / (n * n)
    kappa = 1.0 if pe == 1 else (po - pe) / (1 - pe)
    return {"n": n, "kappa": round(kappa, 4), "accuracy": round(po, 4), "confusion": cm,
            "false_pass": sum(cm[h]["pass"] for h in LABELS if h != "pass"),
            "undetermined": sum(cm[h]["undetermined"] for h in LABELS)}


def judge_verdict(sc: Scenario, entry: Entry, ev, graded: grade.Graded, judge_cmd: str, help_tree: str) -> dict:
    """The judge alone and the combination (checker first) for one answer."""
    from scenarios.runner import _transcript

    prompt = judge.build_prompt(sc, _transcript(ev, entry.text if ev.from_stream else ""), entry.condition, help_tree,
                                checker=graded.to_json())
    run = judge.run_judge(judge_cmd, prompt)
    if run.verdict is None:
        return {"judge": "undetermined", "combined": graded.verdict, "error": run.error}
    v = run.verdict
    walked = [t["id"] for t in v.traps_eval if t.get("respected") is False
              and any(x.id == t.get("id") and x.central for x in sc.traps)]
    alone = "pass" if pass_rule(v.scores, entry.condition, walked)[0] else "fail"
    _scores, _t, ok, _ = judge.merge(graded.scores, _traps(graded), v, entry.condition)
    disagree = judge.disagreements(graded.scores, graded.traps, v)
    return {"judge": alone, "combined": "pass" if ok else "fail", "disagreements": disagree}


def _traps(graded: grade.Graded):
    from scenarios.matching import TrapResult

    return [TrapResult(t["id"], t["central"], t["respected"], t["evidence"]) for t in graded.traps]


def grade_corpus(entries: list[Entry], scenarios: dict[str, Scenario], surface, groups: list[str],
                 judge_cmd: str | None = None, help_tree: str = "", jobs: int = 4) -> list[dict]:
    def one(e: Entry) -> dict:
        sc = scenarios[e.scenario]
        ev = grade.evidence_of(e.text)
        g = grade.grade(sc, ev, surface, e.condition, groups)
        row = {"id": e.id, "scenario": e.scenario, "condition": e.condition, "split": e.split,
               "classes": e.classes, "human": e.label, "reason": e.reason,
               "checker": g.verdict, "checker_reasons": g.reasons, "invented": g.invented}
        if judge_cmd:
            row.update(judge_verdict(sc, e, ev, g, judge_cmd, help_tree))
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, entries))


def summarize(rows: list[dict], graders: list[str]) -> dict:
    out: dict = {"graders": graders, "n": len(rows), "splits": {}, "classes": {}, "disagreements": {}}
    splits = {"all": rows, **{s: [r for r in rows if r["split"] == s] for s in sorted({r["split"] for r in rows})}}
    three = any(r["human"] == "undetermined" for r in rows)  # labels over three categories
    out["categories"] = list(LABELS) if three else ["pass", "fail"]
    for name, rs in splits.items():
        if three:
            out["splits"][name] = {g: agreement3([r["human"] for r in rs], [r[g] for r in rs]) for g in graders}
            continue
        human = [r["human"] == "pass" for r in rs]
        out["splits"][name] = {g: agreement(human, [r[g] for r in rs]).to_json() for g in graders}
    for cls in sorted({c for r in rows for c in r["classes"]}):
        rs = [r for r in rows if cls in r["classes"]]
        out["classes"][cls] = {g: {"n": len(rs), "right": sum(1 for r in rs if r[g] == r["human"])} for g in graders}
    for g in graders:
        out["disagreements"][g] = [{k: r.get(k) for k in ("id", "split", "human", g, "reason", "classes")}
                                   | {"why": (r.get("checker_reasons") or [])[:3] if g == "checker" else r.get("disagreements")}
                                   for r in rows if r[g] != r["human"]]
    return out


def run_labels(labels: list[dict], run: dict) -> dict:
    """Human labels of a run's trials against the verdicts it recorded."""
    trials = {t["id"]: t for t in run["trials"] if t.get("status") == "done"}
    pairs = [(bool(lab["pass"]), trials[lab["id"]]) for lab in labels if lab.get("id") in trials]
    missing = [lab.get("id") for lab in labels if lab.get("id") not in trials]
    human = [h for h, _ in pairs]
    graders = {"combined": ["pass" if t.get("pass") else "fail" for _, t in pairs],
               "checker": [(t.get("checker") or {}).get("verdict", "undetermined") for _, t in pairs]}
    if any((t.get("judge") or {}).get("verdict") for _, t in pairs):
        graders["judge"] = [(t.get("judge") or {}).get("alone", "undetermined") for _, t in pairs]
    sweep = {}
    for th in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
        verdicts = []
        for _, t in pairs:
            walked = [x["id"] for x in t.get("traps", []) if x.get("central") and x.get("respected") is False]
            verdicts.append("pass" if pass_rule(t.get("scores") or {}, t["condition"], walked, threshold=th)[0] else "fail")
        sweep[str(th)] = agreement(human, verdicts).kappa
    return {"n": len(pairs), "graders": list(graders),
            "agreement": {g: agreement(human, v).to_json() for g, v in graders.items()},
            "threshold_sweep": sweep, "labels_missing_from_run": missing,
            "disagreements": [{"id": t["id"], "human": "pass" if h else "fail", "combined": "pass" if t.get("pass") else "fail",
                               "reasons": t.get("reasons", [])} for h, t in pairs if h != bool(t.get("pass"))]}
