"""panio-eval grade and calibrate: one answer graded, and the graders' agreement with human labels."""

from __future__ import annotations

import json
from pathlib import Path

from scenarios.scenario import EvalUsage, load_all, select


def cmd_grade(args) -> int:
    from scenarios import grade
    from scenarios.drift import Guard

    sc = select(load_all(), [args.scenario])[0]
    guard = Guard()
    if sc.id in guard.run([sc]).pending:
        raise EvalUsage(f"panio-eval grade: {sc.id} is pending (its reference needs a command panio lacks)")
    g = grade.grade(sc, grade.evidence_of(args.answer.read_text(encoding="utf-8")), guard.live, args.condition,
                    guard.groups())
    if args.json:
        print(json.dumps(g.to_json(), indent=1))
    else:
        print(f"{sc.id} {args.condition}: {g.verdict.upper()}")
        print("scores: " + " ".join(f"{d}={'-' if v is None else v}" for d, v in g.scores.items()))
        for t in g.traps:
            mark = "judge" if t["respected"] is None else ("ok" if t["respected"] else "WALKED")
            print(f"trap {t['id']}{' (central)' if t['central'] else ''}: {mark}  {t['evidence']}")
        for x in g.invented:
            print(f"invented: {x}")
        for r in g.reasons:
            print(f"why: {r}")
    return 0 if g.verdict == "pass" else 1


ADVERSARIAL = Path(__file__).resolve().parent.parent / "tests" / "eval" / "labelled" / "adversarial.toml"


def cmd_calibrate(args) -> int:
    if not (args.corpus or args.labels or args.run) and ADVERSARIAL.is_file():
        args.corpus = ADVERSARIAL  # a source checkout: the adversarial corpus (issue 40)
    if args.corpus:
        return _calibrate_corpus(args)
    if not (args.labels and args.run):
        raise EvalUsage("panio-eval calibrate: give --corpus FILE, or --labels FILE with --run RUN.json")
    from scenarios import calibrate

    labels = [json.loads(x) for x in args.labels.read_text().splitlines() if x.strip()]
    result = calibrate.run_labels(labels, json.loads(args.run.read_text()))
    if not result["n"]:
        raise EvalUsage("panio-eval calibrate: no labelled trial id is in the run")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"graders: {', '.join(result['graders'])} · n={result['n']}")
    for g, a in result["agreement"].items():
        _print_agreement(g, a)
    print("kappa by pass threshold: " + ", ".join(f"{k}: {v}" for k, v in result["threshold_sweep"].items()))
    for d in result["disagreements"]:
        print(f"disagree {d['id']}: human {d['human']}, verdict {d['combined']}  {'; '.join(d['reasons'][:2])}")
    if result["labels_missing_from_run"]:
        print(f"labels not found in the run: {', '.join(map(str, result['labels_missing_from_run']))}")
    return 0


def _print_agreement(name: str, a: dict) -> None:
    cm = a["confusion"]
    if "pass" in cm:  # three categories: pass, fail, undetermined
        rows = " · ".join(f"human {h}: " + " / ".join(f"{n} {g}" for g, n in cm[h].items()) for h in cm)
        print(f"{name:9} n={a['n']}  kappa={a['kappa']}  accuracy={a['accuracy']}  false passes={a['false_pass']}  "
              f"[{rows}]")
        return
    print(f"{name:9} n={a['n']}  kappa={a['kappa']}  accuracy={a['accuracy']}  "
          f"[human pass: {cm['tp']} pass / {cm['fn']} fail · human fail: {cm['fp']} pass / {cm['tn']} fail]"
          + (f"  undetermined={a['undetermined']}" if a.get("undetermined") else ""))


def _calibrate_corpus(args) -> int:
    from scenarios import calibrate, judge
    from scenarios.drift import Guard
    from scenarios.sandbox import real_panio

    entries = calibrate.Entry.load_all(args.corpus)
    scs = {s.id: s for s in load_all()}
    unknown = sorted({e.scenario for e in entries} - set(scs))
    if unknown:
        raise EvalUsage(f"panio-eval calibrate: unknown scenario(s) in the corpus: {', '.join(unknown)}")
    guard = Guard()
    tree = judge.help_tree(real_panio()) if args.judge else ""
    rows = calibrate.grade_corpus(entries, scs, guard.live, guard.groups(), args.judge, tree, args.jobs)
    graders = ["checker"] + (["judge", "combined"] if args.judge else [])
    result = calibrate.summarize(rows, graders)
    result["answers"] = rows
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    ran = ", ".join(graders) + ("" if args.judge else " (no judge given: judge and combined not measured)")
    print(f"graders: {ran} · corpus {args.corpus} · {len(rows)} answers")
    for split, per in result["splits"].items():
        print(f"[{split}]")
        for g, a in per.items():
            _print_agreement(g, a)
    for g, ds in result["disagreements"].items():
        for d in ds:
            print(f"disagree ({g}) {d['id']} [{d['split']}]: human {d['human']}, {g} {d[g]}  ({d['reason']})  "
                  f"{d['why']}")
    return 0
