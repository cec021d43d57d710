"""panio job run|check|submit|status|list|logs|artifacts|triage|history|cancel|prune: bench jobs and their results
(triage and history: ``controller.cli.jobs.job_triage``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.jobs import job_remote
from controller.cli.common import add_json, command, load_lab, positive_float, positive_int, print_json, say, subcommands

JOB_ID_HELP = "the job's id (`panio job list`)"
DETAILS_RUN = """\
A job file (TOML) names a target (or tags) and steps; each step is a panio
command line with expectations (exit status, a regex on its output), captured
variables for later steps and a timeout. Every step is checked against panio's
own commands before anything runs. Without PANIO_BROKER the job runs in this
process; results go to the results database (`panio job list`).

Exit status for CI: 0 every step passed; 14 the board failed a step
(test_failed); lab failures: 4 unreachable, 8 lease not obtained (busy),
22 timed out (a step, the job's timeout_s or --deadline-s), 15 canceled,
13 the lease was lost (refused), or the failing step's own lab status (3, 5, 9, ...)."""


JOB_FORMAT = """\
The job file (TOML):

  name = "boot"                  # default: the file name
  target = "pico"                # or: tags = ["pi5"]
  timeout_s = 300                # the whole job (optional)
  on_unhealthy = "wait"          # target bad/in maintenance: "wait" (default) or "skip";
                                 # a suite decides for its jobs (default "skip")

  [[steps]]
  name = "capture"
  run = "panio serial watch ${target}"        # starts capture, or finds it running
  [[steps]]
  name = "power-cycle"
  run = "panio power-cycle ${target}"
  [[steps]]
  name = "boots to a login prompt"          # bytes since the previous step began:
  run = "panio serial wait ${target} --since-step --pattern 'login:' --timeout-ms 60000"
  timeout_s = 70                 # per step, default 60
  expect_exit = 0                # default 0; or a list [0, 1]
  expect_output = '"status": "matched"'     # regex the output must match
  reject_output = "Kernel panic"            # regex it must not match
  capture = { ver = 'Linux (\\S+)' }         # -> ${ver} in later steps

A step is a runtime panio command (never a lab edit); ${target}, ${job_id} and
captures are substituted. Verdicts: health complete|incomplete (the lab failed)|
canceled|timed_out, result passed|failed (the board). Runnable examples:
`panio-sim up` writes boot.toml and suite.toml beside its lab. More: docs/jobs.md."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = ("Bench jobs: a target plus panio command steps with expectations. `job run` blocks\n"
                     "and exits with a CI status; history lives in the results database.\n\n" + JOB_FORMAT)
    sub = subcommands(p)
    c = command(sub, "run", "run a job file now and wait for its verdict (CI: exit 0 = passed)", func=run,
                example=["panio job run smoke.toml --target pico --junit out/junit.xml",
                         "panio job run smoke.toml --json"],
                see_also="panio job check, panio job logs, docs/jobs.md", details=DETAILS_RUN)
    _file_target(c)
    c.add_argument("--junit", metavar="FILE", type=Path, help="write JUnit XML (one test case per step) to FILE")
    c.add_argument("--report", metavar="FILE", type=Path, help="write a readable Markdown report to FILE")
    _queue_timeout(c)
    _deadline(c)
    job_remote.add_flag(c)
    add_json(c)

    c = command(sub, "submit", "queue a job file to the worker of the host that owns its target", func=submit,
                example=["panio job submit smoke.toml --target pico", "panio job submit smoke.toml --wait --junit j.xml",
                         "PANIO_TOKEN=... panio job submit smoke.toml --controller https://lab.example:8080 --wait"],
                see_also="panio worker, panio job status, panio job cancel, docs/jobs.md",
                details="Needs PANIO_BROKER (redis://...), or --controller URL (PANIO_CONTROLLER) with a token\n"
                        "in PANIO_TOKEN: then the controller checks and queues it, and this machine needs\n"
                        "no broker, database or key (docs/ci.md). Everything is checked first; a rejected\n"
                        "job queues nothing. With --wait it follows the job and exits like `job run`.")
    _file_target(c)
    c.add_argument("--wait", action="store_true", help="follow the job to its verdict and exit like `job run`")
    c.add_argument("--junit", metavar="FILE", type=Path, help="with --wait: write JUnit XML to FILE")
    c.add_argument("--report", metavar="FILE", type=Path, help="with --wait: write a readable Markdown report")
    _queue_timeout(c)
    _deadline(c)
    job_remote.add_flag(c)
    add_json(c)

    c = command(sub, "check", "validate a job file and its steps without running anything", func=check,
                example="panio job check smoke.toml", see_also="panio job run, docs/jobs.md")
    _file_target(c)
    add_json(c)

    c = command(sub, "status", "show one job: health, result, each step", func=status,
                example="panio job status 12 --json", see_also="panio job logs, panio job list")
    c.add_argument("id", type=positive_int, metavar="JOB", help=JOB_ID_HELP)
    job_remote.add_flag(c)
    add_json(c)

    c = command(sub, "list", "list recent jobs, newest first", func=list_,
                example="panio job list --target pico --limit 5", see_also="panio job status")
    c.add_argument("--target", metavar="TARGET", help="only jobs on TARGET")
    c.add_argument("--state", choices=("queued", "running", "done"), help="only jobs in this state")
    c.add_argument("--limit", type=positive_int, default=20, help="how many")
    job_remote.add_flag(c)
    add_json(c)

    c = command(sub, "logs", "print each step's command line and output", func=logs,
                example="panio job logs 12 --step 2", see_also="panio job artifacts, panio job status")
    c.add_argument("id", type=positive_int, metavar="JOB", help=JOB_ID_HELP)
    c.add_argument("--step", type=positive_int, metavar="N", help="only step N (1-based)")
    job_remote.add_flag(c)
    add_json(c)

    c = command(sub, "artifacts", "list a job's artifacts (step outputs, logs, screenshots) or save them to a folder",
                func=artifacts, example="panio job artifacts 12 --out ./artifacts",
                see_also="panio job logs")
    c.add_argument("id", type=positive_int, metavar="JOB", help=JOB_ID_HELP)
    c.add_argument("--out", type=Path, metavar="DIR", help="write every artifact into DIR")
    job_remote.add_flag(c)
    add_json(c)

    from controller.cli.jobs import job_triage

    job_triage.register(sub)

    c = command(sub, "cancel", "cancel a queued or running job (its running step is stopped)", func=cancel,
                example="panio job cancel 12", see_also="panio job status, panio lease list")
    c.add_argument("id", type=positive_int, metavar="JOB", help=JOB_ID_HELP)
    job_remote.add_flag(c)

    c = command(sub, "prune", "remove finished jobs older than a duration, with their steps and artifacts",
                func=prune, example=["panio job prune --older-than 30d --dry-run",
                                     "panio job prune --older-than 14d --artifacts-only", "panio job prune --json"],
                see_also="the lab's [retention] table (applied automatically), panio job list, docs/jobs.md",
                details="Only finished jobs go (queued and running ones never), judged by when they finished.\n"
                        "Without --older-than it applies the lab file's [retention] table (jobs = \"90d\",\n"
                        "artifacts = \"14d\"), which `schedule serve`, `job run` and `suite run` also apply\n"
                        "on their own at most once an hour. Unless --artifacts-only, device-health history\n"
                        "as old goes too (each target's newest event stays; current health is untouched).\n"
                        "Also removes lab-parse caches of lab files that are gone and per-job lab files a\n"
                        "killed worker left.")
    c.add_argument("--older-than", metavar="DURATION", help="finished longer ago than this: 30d, 12h, 90m, 45s")
    c.add_argument("--artifacts-only", action="store_true",
                   help="remove only the artifacts (serial logs...) of those jobs; keep their history")
    c.add_argument("--dry-run", action="store_true", help="count what would go; remove nothing")
    add_json(c)


def _file_target(c: argparse.ArgumentParser) -> None:
    c.add_argument("file", type=Path, metavar="FILE", help="the job file (TOML; see docs/jobs.md)")
    c.add_argument("--target", metavar="TARGET", help="run on TARGET instead of the file's target/tags")


def _store():
    from controller import backends

    return backends.results_store()


def _reconciled(store, job_id: int, job: dict | None = None) -> dict:
    from controller.jobs.control import reconciled

    return reconciled(store, job_id, job)


def _queue_timeout(c: argparse.ArgumentParser) -> None:
    c.add_argument("--queue-timeout-s", type=positive_float, metavar="S",
                   help="with a broker: if no worker has started the job after S seconds, withdraw it and exit 4 "
                        "(default: wait as long as it takes)")


def _deadline(c: argparse.ArgumentParser) -> None:
    c.add_argument("--deadline-s", type=positive_float, metavar="S",
                   help="give up after S seconds: a job not started is withdrawn, a running one stops at its next "
                        "check; exit 22 (timeout). Default: no deadline")


def _finish(job: dict, args: argparse.Namespace) -> None:
    triage = None
    if getattr(args, "report", None):
        from controller.jobs import report

        triage = report.triage_notes(_store(), [job])
    job_remote.finish(job, args, triage=triage)


def run(args: argparse.Namespace) -> None:
    from controller import backends
    from controller.jobs import local, progress, retention

    if api := job_remote.controller(args):
        args.wait = True
        job_remote.submit(args, api)
        return
    _check_outputs(args)
    lab = load_lab(args)
    retention.auto(lab)  # the lab's [retention], at most once an hour; never fails the job
    if backends.broker_url():
        args.wait = True
        submit(args)
        return
    show = (lambda e, d: None) if args.json else progress.for_stream()
    job = local.run_now(args.file, lab, args.target, show, args.deadline_s)
    _finish(job, args)


def _check_outputs(args: argparse.Namespace) -> None:
    from controller.jobs import report

    report.check_output(getattr(args, "junit", None), "--junit")
    report.check_output(getattr(args, "report", None), "--report")


def submit(args: argparse.Namespace) -> None:
    from controller.jobs import progress, remote

    if api := job_remote.controller(args):
        job_remote.submit(args, api)
        return
    if args.wait:
        _check_outputs(args)
    queued = remote.submit(args.file, load_lab(args), args.target, args.deadline_s)
    if not args.wait:
        if args.json:
            print_json({"job_id": queued["job_id"], "target": queued["target"], "queue": queued["queue"]})
        else:
            say(f"queued job {queued['job_id']} ({queued['name']}) for {queued['target']} on {queued['queue']}")
        return
    if not args.json:
        say(f"queued job {queued['job_id']} for {queued['target']} on {queued['queue']}")
    show = (lambda e, d: None) if args.json else progress.PlainProgress()
    _finish(remote.follow(queued["job_id"], show, queue_timeout_s=args.queue_timeout_s,
                          deadline_at=queued.get("deadline_at")), args)


def check(args: argparse.Namespace) -> None:
    from controller.jobs import spec

    lab = load_lab(args)
    job, steps, targets = spec.prepare(args.file, lab, args.target)
    for i, step in enumerate(spec.plan_steps(steps, lab, targets[0], args.file), 1):  # as a run plans them
        error = step["run"]["args"]["error"] if step["run"].get("op") == "system.fail" else None
        if error and error.get("exit") == 2:  # the step's own words are wrong (a lab's gap may yet be filled)
            from bench_agent.errors import UsageError

            raise UsageError(f"{args.file}: step {i}: {error['message']}", hint=error.get("hint"), step=i)
    if args.json:
        print_json({"file": str(args.file), "name": job["data"]["name"], "targets": targets, "steps": steps})
        return
    say(f"{args.file}: job {job['data']['name']!r} is valid: {len(steps)} steps, targets: {', '.join(targets)}")
    for i, s in enumerate(steps, 1):
        say(f"  {i}. {s['name']}: {s['command']}")


def status(args: argparse.Namespace) -> None:
    from controller import backends
    from controller.jobs import control, overrides, report

    if api := job_remote.controller(args):
        job_remote.status(args, api)
        return
    job = control.quick_status(backends.results_url(), args.id)  # a finished job: no SQLAlchemy (docs/scale.md)
    if job is None:
        job = _reconciled(_store(), args.id)
        job["overrides"] = overrides.for_job(args.id)  # operators who acted under this job's lease, and why
    if args.json:
        print_json(report.brief(job))
    else:
        say("\n".join(report.summary_lines(job) + [overrides.line(o) for o in job["overrides"]]))


def list_(args: argparse.Namespace) -> None:
    from controller import backends
    from controller.jobs.control import list_settled, quick_list

    filters = {"limit": args.limit, "target": args.target, "state": args.state}
    if api := job_remote.controller(args):
        jobs = job_remote.list_(args, api)
    elif (jobs := quick_list(backends.results_url(), **filters)) is None:  # finished jobs: no SQLAlchemy
        jobs = list_settled(_store(), **filters)
    if args.json:
        print_json([{k: v for k, v in j.items() if k not in ("spec", "steps")} for j in jobs])
        return
    if not jobs:
        say("no jobs yet (run one with `panio job run FILE`)")
    for j in jobs:
        verdict = j["health"] + (f", {j['result']}" if j["result"] else "") if j["state"] == "done" else j["state"]
        say(f"{j['id']:>5}  {j['name']:<20} {j['target']:<12} {verdict}")


def logs(args: argparse.Namespace) -> None:
    api = job_remote.controller(args)
    job = api.call("GET", f"/jobs/{args.id}") if api else _store().job(args.id)
    steps = job["steps"]
    if args.step:
        if args.step > len(steps):
            from bench_agent.errors import UsageError

            raise UsageError(f"job {args.id} has {len(steps)} steps, not {args.step}", job=args.id)
        steps = [steps[args.step - 1]]
    if args.json:
        print_json([{"idx": s["idx"] + 1, "name": s["name"], "command": s["command"], "status": s["status"],
                     "output": s["output"]} for s in steps])
        return
    for s in steps:
        say(f"== step {s['idx'] + 1} {s['name']} [{s['status']}]: {s['command']}")
        if s.get("output"):
            say(s["output"].rstrip("\n"))


def _artifact_map(store, job_id: int) -> dict[str, str | bytes]:
    job = store.job(job_id)
    out = {f"step-{s['idx'] + 1:02d}.log": s["output"] for s in job["steps"] if s.get("output")}
    out.update(store.list_artifacts(job_id))
    from controller.jobs import report

    if job["state"] == "done":
        out["junit.xml"] = report.junit(job)
    return out


def artifacts(args: argparse.Namespace) -> None:
    if api := job_remote.controller(args):
        _show_artifacts(args, job_remote.artifacts(args, api))
        return
    items = _artifact_map(_store(), args.id)
    if args.out:
        from controller.jobs import report

        report.check_output(args.out, "--out", folder=True)
        for name, content in items.items():
            if isinstance(content, bytes):  # a screenshot (step-NN.png)
                (args.out / name).write_bytes(content)
            else:
                report.write_text(args.out / name, content)
    _show_artifacts(args, {n: len(c) if isinstance(c, bytes) else len(c.encode()) for n, c in items.items()})


def _show_artifacts(args: argparse.Namespace, sizes: dict[str, int]) -> None:
    if args.json:
        print_json([{"name": n, "bytes": sizes[n], **({"path": str(args.out / n)} if args.out else {})}
                    for n in sizes])
        return
    for n in sizes:
        say(f"{n}  {sizes[n]} bytes" + (f"  -> {args.out / n}" if args.out else ""))


def cancel(args: argparse.Namespace) -> None:
    from controller.jobs.control import cancel as cancel_job

    if api := job_remote.controller(args):
        job_remote.cancel(args, api)
        return
    say(cancel_job(_store(), args.id))


def prune(args: argparse.Namespace) -> None:
    from controller.jobs import retention

    if args.older_than is None:
        if args.artifacts_only:
            from bench_agent.errors import UsageError

            raise UsageError("--artifacts-only needs --older-than DURATION", hint="e.g. --older-than 14d")
        lab = load_lab(args)
        if not retention.settings(lab):
            from bench_agent.errors import UsageError

            raise UsageError("job prune needs --older-than DURATION (the lab file has no [retention] table)",
                             hint="e.g. `panio job prune --older-than 30d --dry-run`")
        out = retention.apply(lab, _store(), dry_run=args.dry_run)
        runs = [out[k] for k in ("artifacts", "jobs") if k in out]
    else:
        older_than_s = retention.parse_duration(args.older_than)
        out = retention.prune(_store(), older_than_s, args.artifacts_only, args.dry_run)
        runs = [out]
    if args.json:
        print_json(out)
        return
    for r in runs:
        verb = "would remove" if r["dry_run"] else "removed"
        age = _age(r["older_than_s"])
        if r["artifacts_only"]:
            say(f"{verb} {r['artifacts']} artifacts ({r['artifact_chars']} characters) of jobs finished over {age} "
                "ago; the jobs stay")
        else:
            say(f"{verb} {r['jobs']} jobs finished over {age} ago: {r['steps']} steps, {r['artifacts']} artifacts "
                f"({r['artifact_chars']} characters), {r['health_events']} health events"
                + (f", {len(r['files'])} stale files" if r["files"] else ""))


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
