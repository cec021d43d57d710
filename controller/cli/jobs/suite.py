"""panio suite run|check: job files over a matrix of targets."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.jobs import job_remote
from controller.cli.common import add_json, command, counted, load_lab, positive_float, print_json, say, subcommands

DETAILS = """\
A suite file lists job files and the targets to run them on (names or tags).
Targets run in parallel; on one target, jobs run one after the other (its lease).
Exit status: 0 every job passed; 14 the board failed at least one job; a lab
failure (4 unreachable, 8 busy, 22 timeout, ...) wins over board failures.
With --deadline-s, jobs not finished by then are withdrawn or stopped and the
suite exits 22 (timeout)."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "Suites: many jobs over many targets. See docs/jobs.md#suites."
    sub = subcommands(p)
    c = command(sub, "run", "run every job of a suite on every target of its matrix and wait", func=run,
                example="panio suite run nightly.toml --junit out/nightly.xml",
                see_also="panio suite check, panio job run, panio schedule add", details=DETAILS)
    c.add_argument("file", type=Path, metavar="FILE", help="the suite file (TOML)")
    c.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (a testsuite per job and target)")
    c.add_argument("--report", type=Path, metavar="FILE", help="write a readable Markdown report: verdicts, steps, output")
    c.add_argument("--deadline-s", type=positive_float, metavar="S",
                   help="give up after S seconds: jobs not started are withdrawn, running ones stop; exit 22 (timeout)")
    job_remote.add_flag(c)
    add_json(c)
    c = command(sub, "check", "validate a suite, its job files and targets without running anything",
                func=check, example="panio suite check nightly.toml", see_also="panio suite run")
    c.add_argument("file", type=Path, metavar="FILE")
    add_json(c)


def run(args: argparse.Namespace) -> None:
    from controller.jobs import progress, report, suite

    def progress_for(target: str):
        return (lambda e, d: None) if args.json else progress.PlainProgress(prefix=f"[{target}] ")

    from controller.jobs import retention

    report.check_output(args.junit, "--junit")
    report.check_output(args.report, "--report")
    if api := job_remote.controller(args):
        name, jobs = job_remote.suite_run(args, api, progress_for)
        show(args, name, jobs, jobs)
        return
    lab = load_lab(args)
    retention.auto(lab)  # the lab's [retention], at most once an hour; never fails the suite
    data, jobs = suite.run(args.file, lab, progress_for, args.deadline_s)
    store = None
    if args.report:
        from controller import backends

        store = backends.results_store()  # with the steps' output
    show(args, data["name"], jobs, [store.job(j["id"]) for j in jobs] if store else jobs, store)


def show(args: argparse.Namespace, name: str, jobs: list[dict], full: list[dict], store=None) -> None:
    """A finished suite's JUnit, report (``full``: its jobs with their steps' output), summary and exit status."""
    from controller.jobs import report, suite

    if args.junit:
        report.write_text(args.junit, report.junit(*jobs, name=name))
    if args.report:
        report.write_text(args.report, report.markdown(*full, title=f"suite {name}",
                                                       triage=report.triage_notes(store, jobs) if store else None))
    if args.json:
        print_json({"suite": name, "jobs": [{k: v for k, v in j.items() if k not in ("spec", "steps")}
                                                    for j in jobs]})
    else:
        say(f"suite {name}: {counted(len(jobs), 'job')}")
        for j in jobs:
            verdict = (j["health"] or j["state"]) + (f", {j['result']}" if j["result"] else "")
            say(f"  job {j['id']:>4}  {j['name']:<20} {j['target']:<12} {verdict}")
    err = suite.ci_error(name, jobs)
    if err is not None:
        raise err


def check(args: argparse.Namespace) -> None:
    from controller.jobs import suite

    data, entries = suite.matrix(args.file, load_lab(args))
    rows = [{"job": job["data"]["name"], "file": str(job["path"]), "target": target, "steps": len(steps)}
            for job, steps, target in entries]
    if args.json:
        print_json({"suite": data["name"], "matrix": rows})
        return
    say(f"{args.file}: suite {data['name']!r} is valid: {counted(len(rows), 'job')}")
    for r in rows:
        say(f"  {r['job']} on {r['target']} ({r['steps']} steps)")
