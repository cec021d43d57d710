"""panio-eval: the eval suite's command line.

  panio-eval --check                       drift guard (references + SAFE vs the live CLI)
  panio-eval list                          the catalog, with pending scenarios named
  panio-eval run --all --reference         golden self-test (references pass, known-bad fail)
  panio-eval run --agent claude --condition cold --n 3 [--scenario C1 ...]
  panio-eval run --resume RUN.json         continue an interrupted run (finished trials kept)
  panio-eval regrade RUN.json              grade a run's recorded answers again with the current checker
  panio-eval report RUN.json [--previous OLD.json] [--format md|html|json]
  panio-eval loopback                      serial loopback scenarios against a PTY fake DUT
  panio-eval hardware                      references as jobs on the simulated board (or --lab LAB --target T)
  panio-eval judge-prompt C3 --transcript FILE
  panio-eval grade C3 answer.md            grade one answer (text or any adapter's event stream)
  panio-eval calibrate --corpus tests/eval/labelled/corpus.toml [--judge CMD]
  panio-eval calibrate --labels human.jsonl --run RUN.json

Exit status: 0 ok; 1 a check, self-test or run gate failed; 2 bad usage.
Errors print one human line and one JSON line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from scenarios.scenario import ALL_CONDITIONS, CONDITIONS, CatalogError, EvalUsage, Interrupted, load_all, select


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise EvalUsage(f"{self.prog}: {message}")


def build() -> Parser:
    p = Parser(prog="panio-eval", description="Measure how well a naive coding agent discovers and uses panio.",
               epilog="example:\n  panio-eval --check\n  panio-eval run --all --reference\n\nsee also: docs/evals.md",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="drift guard: every reference command/flag and SAFE key exists")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser)
    ls = sub.add_parser("list", help="list the catalog (pending scenarios named)")
    ls.add_argument("--json", action="store_true")
    r = sub.add_parser("run", help="golden self-test (--reference) or agent trials (--agent)",
                       epilog="example:\n  panio-eval run --all --reference\n"
                              "  panio-eval run --agent claude --condition cold --n 3 --scenario C1 C3",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--reference", action="store_true", help="run each reference (and known-bad variant) through its grader")
    r.add_argument("--all", action="store_true", help="every scenario (default when no --scenario)")
    r.add_argument("--core", action="store_true", help="the seed's core set only")
    r.add_argument("--scenario", nargs="+", metavar="ID", help="scenario ids (C1 R4 s11 ...)")
    r.add_argument("--no-bad", action="store_true", help="--reference only: skip the known-bad variants")
    r.add_argument("--planned", action="store_true", help="preview: treat announced commands as present (not a valid result)")
    r.add_argument("--agent", metavar="claude|codex|gemini|pi|CMD", help="the harness, or a command (prompt on stdin)")
    r.add_argument("--condition", nargs="+", metavar="C",
                   help="cold (default), warm, preloaded (or all of these), mcp (panio mcp instead of the CLI)")
    r.add_argument("--n", type=int, help="trials per cell (default 3)")
    r.add_argument("--parallel", type=int, help="trials running at once (default 2)")
    r.add_argument("--timeout-s", type=float, help="time limit per trial (default 600)")
    r.add_argument("--retry", type=int, metavar="N",
                   help="run a trial again up to N times when its harness failed (crashed, could not start); "
                        "never for a wrong answer or a limit (default 0)")
    r.add_argument("--resume", type=Path, metavar="RUN.json",
                   help="continue an interrupted run: the trials it finished are kept, the rest run "
                        "(with the run's own parameters; --parallel and --retry may change)")
    r.add_argument("--judge", metavar="CMD", help="judge command: prompt on stdin, verdict on stdout (not the model under test)")
    r.add_argument("--judge2", metavar="CMD", help="an optional second rater (its agreement with the first is reported)")
    r.add_argument("--model", help="the agent's model (passed to the harness; recorded in run.json)")
    r.add_argument("--provider", help="pi: the model provider (e.g. openrouter)")
    r.add_argument("--agent-arg", action="append", default=[], metavar="ARG",
                   help="pass ARG through to the harness (repeatable; --agent-arg=--flag for a dash)")
    r.add_argument("--isolation", choices=["home", "light"], help="home: sandbox HOME (valid; default); light: smoke test")
    r.add_argument("--link-auth", nargs="*", metavar="PATH", help="files under your HOME to link into the sandbox HOME")
    r.add_argument("--out", type=Path, help="run directory (default ./panio-eval-runs/<time>)")
    r.add_argument("--previous", type=Path, help="a previous run.json to diff against")
    r.add_argument("--jobs", type=int, default=4, help="--reference: parallel sandboxes (default 4)")
    r.add_argument("--json", action="store_true")
    rg = sub.add_parser("regrade", help="grade a whole run's recorded answers again with the current checker",
                        description="Grade every trial of a run again from what it recorded (event stream, argv log,\n"
                                    "lab end state) with the current checker and catalog; no agent runs. Writes a new\n"
                                    "run.json and reports that say they were regraded, from which run, and which\n"
                                    "verdicts changed. Judge verdicts are kept as recorded unless --judge is given.",
                        epilog="example:\n  panio-eval regrade runs/claude-1/run.json\n"
                               "  panio-eval regrade runs/claude-1/run.json --out runs/claude-1-regraded\n\n"
                               "see also: panio-eval report, docs/evals.md",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rg.add_argument("run", type=Path, metavar="RUN.json")
    rg.add_argument("--out", type=Path, help="directory for the new run.json and reports (default: beside RUN.json, "
                                             "regraded-<time>/)")
    rg.add_argument("--judge", metavar="CMD", help="judge the transcripts again with this command")
    rg.add_argument("--judge2", metavar="CMD", help="and a second rater")
    rg.add_argument("--json", action="store_true")
    rep = sub.add_parser("report", help="render a run (json, md, html), optionally diffed against a previous one")
    rep.add_argument("run", type=Path)
    rep.add_argument("--previous", type=Path)
    rep.add_argument("--format", choices=["md", "html", "json"], default="md")
    jp = sub.add_parser("judge-prompt", help="print the judge prompt for a scenario and a transcript")
    jp.add_argument("scenario")
    jp.add_argument("--transcript", type=Path, required=True)
    jp.add_argument("--condition", choices=CONDITIONS, default="cold")
    lp = sub.add_parser("loopback", help="run the serial loopback scenarios (PTY fake DUT) for real")
    lp.add_argument("--scenario", nargs="+", metavar="ID")
    lp.add_argument("--json", action="store_true")
    hw = sub.add_parser("hardware", help="hardware tier: references as jobs on the simulated board (or --lab)",
                        description="Run each scenario's reference as a panio job on a bench, graded on what happened.\n\n"
                                    "Default: panio's simulated board, in a private state directory. --lab LAB --target T:\n"
                                    "the operator's board, on the operator's own daemons (a running capture is used and left\n"
                                    "running). The board's prompt, screen text and setup menu come from its\n"
                                    "[targets.T.profile] (docs/lab-file.md); a scenario the board cannot run is listed\n"
                                    "as 'cannot run' with the reason. Exit 1 if any scenario failed.",
                        epilog="example:\n  panio-eval hardware --scenario R3 R6\n"
                               "  panio-eval hardware --lab ~/lab.toml --target zeta --scenario R1 R3 R6 R10\n\n"
                               "see also: docs/evals.md (the hardware tier), docs/lab-file.md",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    hw.add_argument("--scenario", nargs="+", metavar="ID")
    hw.add_argument("--lab", type=Path, help="a real bench's lab file instead of the simulated board")
    hw.add_argument("--target", help="the target on that bench")
    hw.add_argument("--print-job", metavar="ID",
                    help="print the job file of one scenario and exit (with --lab/--target: for that board)")
    hw.add_argument("--json", action="store_true")
    gr = sub.add_parser("grade", help="grade one answer (a final answer's text or any adapter's event stream)",
                        epilog="example:\n  panio-eval grade R4 answer.md\n  panio-eval grade C1 stream.jsonl --condition warm\n\n"
                               "see also: panio-eval calibrate, docs/evals.md",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    gr.add_argument("scenario")
    gr.add_argument("answer", type=Path, help="a text answer or an event stream (claude, codex, gemini, pi)")
    gr.add_argument("--condition", choices=ALL_CONDITIONS, default="cold")
    gr.add_argument("--json", action="store_true")
    cal = sub.add_parser("calibrate", help="Cohen's kappa + confusion matrix of verdicts vs human labels",
                         epilog="example:\n  panio-eval calibrate --corpus tests/eval/labelled/corpus.toml\n"
                                "  panio-eval calibrate --labels human.jsonl --run RUN.json\n\nsee also: docs/evals.md",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    cal.add_argument("--corpus", type=Path, help="a labelled corpus (corpus.toml): graded here, per split")
    cal.add_argument("--judge", metavar="CMD", help="--corpus: also grade with this judge (alone and combined)")
    cal.add_argument("--labels", type=Path, help='JSON lines: {"id": TRIAL_ID, "pass": true|false}')
    cal.add_argument("--run", type=Path, help="the run.json whose verdicts to compare with --labels")
    cal.add_argument("--jobs", type=int, default=4, help="--corpus: answers graded at once (default 4)")
    cal.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build().parse_args(argv)
        return dispatch(args)
    except EvalUsage as exc:
        return _fail(str(exc), "usage", 2)
    except Interrupted as exc:
        return _fail(f"{exc}: {len(exc.trials)} trial(s) recorded as interrupted in {exc.path}; continue with "
                     f"`panio-eval run --resume {exc.path}`", "interrupted", 128 + int(exc.signum))
    except CatalogError as exc:
        return _fail(str(exc), "catalog", 2)
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FileNotFoundError as exc:
        return _fail(f"no such file: {exc.filename}", "usage", 2)
    except (OSError, ValueError) as exc:
        return _fail(f"{type(exc).__name__}: {exc}", "error", 1)


def _fail(msg: str, code: str, status: int) -> int:
    sys.stderr.write(f"panio-eval: {msg}\n")
    sys.stderr.write(json.dumps({"error": code, "exit": status, "message": msg}) + "\n")
    return status


def dispatch(args: argparse.Namespace) -> int:
    if args.check and args.cmd is None:
        return cmd_check(args)
    if args.cmd == "list":
        return cmd_list(args)
    if args.cmd == "run":
        return cmd_run(args)
    if args.cmd == "report":
        return cmd_report(args)
    if args.cmd == "regrade":
        return cmd_regrade(args)
    if args.cmd == "judge-prompt":
        return cmd_judge_prompt(args)
    if args.cmd in ("grade", "calibrate"):
        from scenarios import cli_grade

        return cli_grade.cmd_grade(args) if args.cmd == "grade" else cli_grade.cmd_calibrate(args)
    if args.cmd == "loopback":
        return cmd_loopback(args)
    if args.cmd == "hardware":
        return cmd_hardware(args)
    build().print_help()
    return 0


def cmd_check(args) -> int:
    from scenarios.drift import Guard

    t0 = time.monotonic()
    report = Guard().run()
    if args.json:
        print(json.dumps({**report.to_json(), "seconds": round(time.monotonic() - t0, 3)}, indent=1))
    else:
        for e in report.errors:
            print(f"DRIFT  {e}")
        for sid, missing in report.pending.items():
            print(f"pending  {sid}: needs {', '.join(missing)}")
        for sid, missing in report.waiting.items():
            print(f"waiting  {sid}: optional/alternative steps need {', '.join(missing)}")
        if report.safe_pending:
            print(f"pending  SAFE allowlist: {', '.join(report.safe_pending)}")
        runnable = report.checked - len(report.pending)
        print(f"{'ok' if report.ok else 'FAILED'}: {report.checked} scenarios, {runnable} runnable, "
              f"{len(report.pending)} pending, {len(report.errors)} drift error(s) ({time.monotonic() - t0:.2f}s)")
    return 0 if report.ok else 1


def cmd_list(args) -> int:
    from scenarios.drift import Guard

    scs = load_all()
    pending = Guard().run(scs).pending
    rows = [{"id": s.id, "title": s.title, "tier": s.tier, "group": s.group, "core": s.core,
             "pending": pending.get(s.id, [])} for s in scs]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            extra = f"  pending: {', '.join(r['pending'])}" if r["pending"] else ""
            print(f"{r['id']:4} {r['tier']}  {'core ' if r['core'] else '     '}{r['title']}{extra}")
    return 0


def _scenarios(args):
    scs = load_all()
    if args.scenario:
        return select(scs, args.scenario)
    if args.core:
        return [s for s in scs if s.core]
    return scs


RESUME_FIXED = ("agent", "condition", "n", "timeout_s", "scenario", "core", "model", "provider", "agent_arg", "judge",
                "judge2", "isolation", "link_auth", "out", "planned", "reference", "all")


def cmd_run(args) -> int:
    if args.resume:
        return _resume(args)
    if args.reference:
        return _reference(args)
    if not args.agent:
        raise EvalUsage("panio-eval run: give --reference or --agent")
    if args.retry is not None and args.retry < 0:
        raise EvalUsage("panio-eval run: --retry must be 0 or more")
    args.condition = args.condition or ["cold"]
    args.n = 3 if args.n is None else args.n
    args.parallel = 2 if args.parallel is None else args.parallel
    args.timeout_s = 600 if args.timeout_s is None else args.timeout_s
    args.isolation = args.isolation or "home"
    args.link_auth = args.link_auth or []
    if args.parallel < 1 or args.timeout_s <= 0:
        raise EvalUsage("panio-eval run: --parallel must be at least 1 and --timeout-s above 0")
    conds = list(CONDITIONS) if args.condition == ["all"] else [c for x in args.condition for c in x.split(",")]
    bad = [c for c in conds if c not in ALL_CONDITIONS]
    if bad:
        raise EvalUsage(f"panio-eval run: unknown condition(s) {', '.join(bad)} (cold, warm, preloaded, mcp)")
    if args.n < 1:
        raise EvalUsage("panio-eval run: --n must be at least 1")
    if args.n < 3:
        sys.stderr.write(f"panio-eval: warning: --n {args.n} gives no usable spread; the seed asks for N >= 3 trials per cell\n")
    for j in (args.judge, args.judge2):
        why = _judge_is_agent(j, args.agent, args.model)
        if why:
            raise EvalUsage(f"panio-eval run: the judge may not be the model under test ({why})")
    from scenarios import runner

    out = args.out or Path("panio-eval-runs") / time.strftime("%Y%m%dT%H%M%S")
    cfg = runner.RunConfig(agent=args.agent, conditions=conds, n=args.n, out=out, parallel=args.parallel,
                           timeout_s=args.timeout_s, judge_cmd=args.judge, isolation=args.isolation,
                           link_auth=args.link_auth, planned=args.planned, model=args.model, provider=args.provider,
                           agent_args=args.agent_arg, judge2_cmd=args.judge2, retry=args.retry or 0)
    run = runner.run(_scenarios(args), cfg)
    return _finish(run, out, args)


def _finish(run: dict, out: Path, args) -> int:
    from scenarios import report

    write_reports(run, out, getattr(args, "previous", None))
    agg = report.aggregate(run)
    if args.json:
        print(json.dumps(agg, indent=1))
    else:
        print(report.markdown(agg))
        print(f"run directory: {out}")
    return 0


def _resume(args) -> int:
    from scenarios import runner

    given = [f"--{k.replace('_', '-')}" for k in RESUME_FIXED if getattr(args, k, None) not in (None, False, [])]
    if given:
        raise EvalUsage(f"panio-eval run --resume: {', '.join(given)} cannot change: a resumed run keeps the "
                        "parameters it was started with (only --parallel and --retry may change)")
    if (args.retry is not None and args.retry < 0) or (args.parallel is not None and args.parallel < 1):
        raise EvalUsage("panio-eval run --resume: --retry must be 0 or more and --parallel at least 1")
    run, out = runner.resume(args.resume, parallel=args.parallel, retry=args.retry)
    return _finish(run, out, args)


def cmd_regrade(args) -> int:
    from scenarios import report
    from scenarios.regrade import regrade

    run, out = regrade(args.run, args.out, args.judge, args.judge2)
    write_reports(run, out, args.run)
    agg = report.aggregate(run)
    if args.json:
        print(json.dumps(agg, indent=1))
    else:
        print(report.markdown(agg))
        print(f"regraded run: {out / 'run.json'}")
    return 0


def _judge_is_agent(judge: str | None, agent: str, model: str | None) -> str | None:
    """004 §7: a model grading its own work is not independent."""
    if not judge:
        return None
    import shlex

    toks = shlex.split(judge)
    if model and model in toks:
        return f"the judge command names the agent's model {model}"
    names_model = any(t in ("-m", "--model") or t.startswith("--model=") for t in toks)
    if toks and Path(toks[0]).name == agent and not names_model:
        return f"the judge runs {agent} with its default model, as the agent does: give the judge another --model"
    return None


def write_reports(run: dict, out: Path, previous: Path | None) -> None:
    from scenarios import report

    agg = report.aggregate(run)
    d = report.diff(agg, report.aggregate(json.loads(previous.read_text()))) if previous else None
    (out / "report.json").write_text(json.dumps({**agg, "diff": d}, indent=1))
    (out / "report.md").write_text(report.markdown(agg, d))
    (out / "report.html").write_text(report.html_report(agg, d))


def _reference(args) -> int:
    from scenarios import selftest

    t0 = time.monotonic()
    outcomes = selftest.run(_scenarios(args), bad=not args.no_bad, planned=args.planned, jobs=args.jobs)
    secs = time.monotonic() - t0
    failed = [o for o in outcomes if not o.ok]
    if args.json:
        print(json.dumps({"ok": not failed, "seconds": round(secs, 2), "outcomes": [o.to_json() for o in outcomes]}, indent=1))
    else:
        for o in outcomes:
            mark = "ok  " if o.ok else "FAIL"
            want = "" if o.variant == "reference" else " (known-bad: must fail)"
            detail = f"  [{'; '.join(o.detail[:2])}]" if o.detail and (not o.ok or o.status == "pending") else ""
            print(f"{mark} {o.scenario:4} {o.variant:24} {o.status}{want}{detail}")
        n_pend = len({o.scenario for o in outcomes if o.status == "pending"})
        print(f"{'ok' if not failed else 'FAILED'}: {len(outcomes)} checks, {len(failed)} failed, "
              f"{n_pend} scenario(s) pending ({secs:.1f}s)" + ("  PREVIEW: planned surface" if args.planned else ""))
    return 0 if not failed else 1


def cmd_report(args) -> int:
    from scenarios import report

    agg = report.aggregate(json.loads(args.run.read_text()))
    d = report.diff(agg, report.aggregate(json.loads(args.previous.read_text()))) if args.previous else None
    if args.format == "json":
        print(json.dumps({**agg, "diff": d}, indent=1))
    elif args.format == "html":
        sys.stdout.write(report.html_report(agg, d))
    else:
        sys.stdout.write(report.markdown(agg, d))
    return 0


def cmd_judge_prompt(args) -> int:
    from scenarios import judge
    from scenarios.sandbox import real_panio

    sc = select(load_all(), [args.scenario])[0]
    sys.stdout.write(judge.build_prompt(sc, args.transcript.read_text(), args.condition, judge.help_tree(real_panio())))
    return 0


def cmd_loopback(args) -> int:
    import tempfile

    from scenarios import loopback

    scs = select(load_all(), args.scenario) if args.scenario else load_all()
    with tempfile.TemporaryDirectory(prefix="panio-eval-loop-") as tmp:
        results = loopback.run_all(scs, Path(tmp))
    failed = [r for r in results if r.status == "fail"]
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
    else:
        for r in results:
            print(f"{'FAIL' if r.status == 'fail' else 'ok  '} {r.scenario:4} {r.status}  {'; '.join(r.detail)}")
    return 1 if failed else 0


def cmd_hardware(args) -> int:
    import tempfile

    from scenarios import hardware

    if bool(args.lab) != bool(args.target):
        raise EvalUsage("panio-eval hardware: --lab and --target go together")
    if args.print_job:
        sc = select(load_all(), [args.print_job])[0]
        if not args.lab:  # for panio's simulated board
            sys.stdout.write(hardware.job_toml(sc))
            return 0
        import os

        table, err = hardware.target_table(args.lab, args.target, dict(os.environ))
        power = table.get("power") or {}
        why = err or (hardware.why_not(sc, args.target, table, hardware.steps_of(sc, False, power)[0]) if sc.hardware
                      else hardware.no_form(sc))
        if why:
            raise EvalUsage(f"panio-eval hardware: {sc.id} {why if why.startswith('cannot run') else 'cannot run: ' + why}")
        sys.stdout.write(hardware.job_toml(sc, table.get("profile") or {}, own_bench=False, power=power))
        return 0
    scs = select(load_all(), args.scenario) if args.scenario else load_all()
    with tempfile.TemporaryDirectory(prefix="panio-eval-hw-") as tmp:
        results = hardware.run_all(scs, Path(tmp), args.lab, args.target)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
    else:
        for r in results:
            mark = {"fail": "FAIL", "cannot_run": "--  "}.get(r.status, "ok  ")
            shown = "; ".join(r.detail) if r.status == "cannot_run" else f"{r.status}  {'; '.join(r.detail)}"
            print(f"{mark} {r.scenario:4} {shown}")
    return 1 if any(r.status == "fail" for r in results) else 0
