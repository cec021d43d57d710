"""panio job triage|history: what changed since a failed job's last pass, and which jobs and boards are flaky."""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, command, positive_int, print_json, say

DETAILS_TRIAGE = """\
Compares a job that did not pass with the last passing run of the same job
(same name and job file) on the same target, else on a target with the same
tags, else the same job name with another file (then the file diff shows).
Reports the first step whose verdict differs and how; in that step's output
and in the job's serial log, the first divergent line (after normalising what
always changes: timestamps, uptime brackets, addresses, PIDs, job ids,
counters; add your own with [triage] ignore = ['regex'] in the job file) with
context from both runs, the lines the passing run had that this one never
reached, a line that came much later than before; the inputs that changed
(job file, the target's lab table, panio version, captured variables); the
screenshots of both runs at that step; and the job's flaky label.
Exit status: 0 (whatever the job's verdict); 3 no such job."""

DETAILS_HISTORY = """\
Per target: how the last N finished runs of job NAME went (P pass, F fail,
oldest first), the pass rate, and a label: flaky (identical inputs, at least
two separate failures with passes between them: one failure among passes, or
an outage then a fix, is not flaky) or a regression (passed, then fails with
identical inputs: see `panio job triage`). Runs the lab failed (incomplete)
count apart. Also names the boards whose jobs or health checks fail more than
their peers', each judged on its own last 50 jobs."""


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "triage", "what changed since this job's last pass: first divergent step and line, inputs",
                func=triage, example=["panio job triage 42", "panio job triage 42 --json"],
                see_also="panio job history, panio job logs, docs/triage.md", details=DETAILS_TRIAGE)
    c.add_argument("id", type=positive_int, metavar="JOB", help="the job's id (`panio job list`)")
    c.add_argument("--context", type=positive_int, default=3, metavar="N", help="lines of context")
    add_json(c)
    c = command(sub, "history", "pass rate per target, flaky label, boards that fail more than their peers",
                func=history, example=["panio job history boot", "panio job history boot --target board0 --runs 50"],
                see_also="panio job triage, panio job list, docs/triage.md", details=DETAILS_HISTORY)
    c.add_argument("name", metavar="NAME", help="the job's name (its file's `name`, else the file's stem)")
    c.add_argument("--target", metavar="TARGET", help="only runs on TARGET")
    c.add_argument("--runs", type=positive_int, default=20, metavar="N", help="the last N runs per target")
    add_json(c)


def _store():
    from controller import backends

    return backends.results_store()


def triage(args: argparse.Namespace) -> None:
    from bench_agent.triage import flaky
    from bench_agent.triage import compare as tri

    store = _store()
    job = store.job(args.id)
    t = tri.triage(store, args.id, flaky.for_job(store, job), context=args.context)
    if args.json:
        print_json(t)
        return
    say("\n".join(lines(t)))


def lines(t: dict) -> list[str]:
    """The triage for people, in the order an operator reads it."""
    j = t["job"]
    out = [f"job {j['id']} {j['name']} on {j['target']}: {j['health']}, {j['result'] or '-'}: {j['reason'] or ''}"]
    words = t.get("last_words")
    if words:
        out.append(f"  the board's last words (step {words['step']} waited in vain; {words['source']}):")
        out += [f"    {line}" for line in words["lines"]]
    base = t.get("baseline")
    if base is None:
        out.append(f"  no baseline: {t['match']}")
        return out + _flaky(t)
    out.append(f"  last pass: job {base['id']} on {base['target']} ({t['match']})")
    s = t.get("step")
    if s:
        out.append(f"  first divergent step: {s['idx'] + 1}. {s['name']}: {s['passing_status']} -> {s['status']}")
        out += [f"    - {h}" for h in s["how"]]
    else:
        out.append("  every step has the same verdict as in the last pass")
    for d in t.get("logs", []):
        out += _log(d)
    out += _inputs(t.get("inputs") or {})
    for shot in t.get("screenshots", []):
        differ = {True: "they differ", False: "they are the same", None: "only one run has one"}[shot["differ"]]
        out.append(f"  screenshots {shot['name']}: {differ} (`panio job artifacts {j['id']} --out DIR`, "
                   f"`panio job artifacts {base['id']} --out DIR`)")
    return out + _flaky(t)


def _log(d: dict) -> list[str]:
    out = [f"  {d['source']} ({d['lines'][1]} lines; last pass {d['lines'][0]}):"]
    first = d.get("first")
    if first:
        said = {"extra": "a line the last pass never printed", "changed": "a line that changed",
                "missing": "a line the last pass printed here and this run did not"}[first["kind"]]
        out.append(f"    first divergent line ({said}): {first['line'].strip()}")
        if first.get("instead_of"):
            out.append(f"      instead of: {first['instead_of'].strip()}")
        out.append("      this run:")
        out += [f"      {'>' if w['mark'] else ' '} {w['no']:>5}  {w['text'].rstrip()}" for w in first["failing"]]
        out.append("      last pass:")
        out += [f"      {'>' if w['mark'] else ' '} {w['no']:>5}  {w['text'].rstrip()}" for w in first["passing"]]
    else:
        out.append("    no divergent line")
    late = d.get("late")
    if late:
        out.append(f"    late: {late['line'].strip()!r} came {late['wait_s']:g} s after {late['after'].strip()!r} "
                   f"(last pass: {late['passing_wait_s']:g} s)")
    if d.get("never_reached"):
        out.append(f"    never reached ({d['never_reached_count']} lines of the last pass), from:")
        out += [f"        {line.rstrip()}" for line in d["never_reached"][:5]]
    return out


def _inputs(inputs: dict) -> list[str]:
    if not inputs:
        return ["  inputs: the same (job file, lab table, panio version, captured variables)"]
    out = ["  inputs that changed:"]
    if "job_file" in inputs:
        out.append("    job file:")
        out += [f"      {line}" for line in inputs["job_file"][:40]]
    if "lab" in inputs:
        out.append(f"    the target's lab table: {', '.join(inputs['lab']['changed'])}")
    if "panio" in inputs:
        out.append(f"    panio: {inputs['panio']['passing']} -> {inputs['panio']['failing']}")
    for var, v in (inputs.get("captured") or {}).items():
        out.append(f"    ${{{var}}}: {v['passing']!r} -> {v['failing']!r}")
    return out


def _flaky(t: dict) -> list[str]:
    f = t.get("flaky") or {}
    if f.get("flaky"):
        return [f"  FLAKY: {f['why']}"]
    if f.get("regression_since"):
        return [f"  regression: {f['why']}"]
    why = f": {f['why']}" if f.get("why") else ""
    return [f"  not flaky ({f['sequence'] or 'no judged runs'} over the last runs){why}"] if f else []


def history(args: argparse.Namespace) -> None:
    from bench_agent.triage import flaky

    h = flaky.history(_store(), args.name, args.target, args.runs)
    if args.json:
        print_json(h)
        return
    if not h["targets"]:
        say(f"no finished runs of job {args.name!r}" + (f" on {args.target}" if args.target else "")
            + " (see `panio job list`)")
    for target, v in h["targets"].items():
        rate = "-" if v["pass_rate"] is None else f"{v['pass_rate']:.0%}"
        label = "FLAKY" if v["flaky"] else ("regression" if v["regression_since"] else "steady")
        lab = f", {v['lab_failed']} lab failures" if v["lab_failed"] else ""
        say(f"{target:<14} pass rate {rate:>4} ({v['passed']}/{v['judged']}{lab})  {v['sequence'] or '-':<20} {label}")
        if v["why"]:
            say(f"{'':<14} {v['why']}")
    for o in h["outliers"]:
        say(f"fails more than its peers: {o['why']}")
