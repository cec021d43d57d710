"""panio schedule add|list|rm|serve: suites at set times, fired by exactly one scheduler."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from bench_agent.errors import PanioError
from controller.cli.common import add_json, check_name, command, counted, load_lab, print_json, say, subcommands
from controller.cli.jobs import job_remote


def register(p: argparse.ArgumentParser, name: str) -> None:
    from controller.jobs.schedules import EVERY_HELP

    p.description = ("Schedules run a suite at a time of day (--at 02:00) or every so often (--every 6h).\n"
                     "They are kept in the results database; `panio schedule serve` fires them, and only\n"
                     "one scheduler may run (a second is refused naming the first). add, list and rm take\n"
                     "--controller URL (token in PANIO_TOKEN): the controller keeps the suite and its job\n"
                     "files (a submitter token: a suite on its allow list only; docs/ci.md).")
    sub = subcommands(p)
    c = command(sub, "add", "schedule a suite daily at a time, or every so often", func=add,
                example=["panio schedule add nightly --suite nightly.toml --at 02:00",
                         "panio schedule add hourly-smoke --suite smoke-suite.toml --every 1h"],
                see_also="panio schedule list, panio schedule serve, panio suite run")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--suite", required=True, type=Path, metavar="FILE", help="the suite file (checked now)")
    when = c.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="HH:MM", help="every day at this local time")
    when.add_argument("--every", metavar="DURATION", help=EVERY_HELP)
    job_remote.add_flag(c)
    c = command(sub, "list", "list schedules: when, next run, last run and its jobs", func=list_,
                example="panio schedule list --json", see_also="panio schedule add, panio job list")
    add_json(c)
    job_remote.add_flag(c)
    c = command(sub, "rm", "remove a schedule", func=rm, example="panio schedule rm nightly",
                see_also="panio schedule list")
    c.add_argument("name", metavar="NAME")
    job_remote.add_flag(c)
    c = command(sub, "serve", "run the scheduler (exactly one may run; SIGTERM stops it after running suites)",
                func=serve, example="panio schedule serve", see_also="panio schedule list, panio lease list",
                details="Runs each due suite like `panio suite run` (in this process, or queued to workers\n"
                        "when PANIO_BROKER is set). Its lock shows in `panio lease list` as _scheduler.\n"
                        "It also re-checks, with backoff, each target an automatic health check made bad,\n"
                        "so a board comes back to good on its own (docs/operations.md).")


def _store():
    from controller import backends
    from controller.jobs.schedules import ScheduleStore

    return ScheduleStore(backends.results_url())


def add(args: argparse.Namespace) -> None:
    from controller.jobs import schedules, suite

    check_name("schedule", args.name)
    api = job_remote.controller(args)
    if api is not None:
        row = job_remote.schedule_add(args, api)
        when = f"daily at {row['at']}" if row["at"] else f"every {args.every}"
        say(f"scheduled {row['name']} on the controller: suite {row['suite']} ({counted(row['jobs'], 'job')}) "
            f"{when}; next run {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(row['next_due']))}")
        return
    at = schedules.parse_at(args.at) if args.at is not None else None  # '' is refused, not taken for "not given"
    every_s = schedules.parse_every(args.every) if args.every is not None else None
    path = args.suite.resolve()
    data, entries = suite.matrix(path, load_lab(args))  # reject a bad suite now, not at 2 a.m.
    row = _store().add(args.name, path, at, every_s)
    when = f"daily at {at}" if at else f"every {args.every}"
    say(f"scheduled {args.name}: suite {data['name']} ({counted(len(entries), 'job')}) {when}; next run "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(row['next_due']))}")


def list_(args: argparse.Namespace) -> None:
    api = job_remote.controller(args)
    rows = _store().list() if api is None else job_remote.schedule_list(api)
    if args.json:
        print_json(rows)
        return
    if not rows:
        say("no schedules (add one with `panio schedule add NAME --suite FILE --at HH:MM`)")
    for r in rows:
        if r["problem"]:
            say(f"{r['name']:<16} never runs: {r['problem']} (remove it with `panio schedule rm NAME`)")
            continue
        when = f"at {r['at']}" if r["at"] else f"every {r['every_s']:g}s"
        nxt = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["next_due"]))
        last = f"last jobs {r['last_jobs']}" if r["last_jobs"] else "never ran"
        say(f"{r['name']:<16} {when:<14} next {nxt}  {last}  ({r['suite']})")


def rm(args: argparse.Namespace) -> None:
    api = job_remote.controller(args)
    if api is not None:
        say(job_remote.schedule_rm(args, api))
        return
    _store().remove(args.name)
    say(f"removed schedule {args.name}")


def serve(args: argparse.Namespace) -> None:
    from bench_agent import outage
    from controller.jobs import progress, suite
    from controller.jobs.schedules import Scheduler

    def log(text: str) -> None:
        sys.stdout.write(time.strftime("%H:%M:%S ") + text + "\n")
        sys.stdout.flush()

    def fire(s: dict, busy: dict[str, int], created) -> list[int]:
        lab = load_lab(args)  # re-read each time: lab edits apply to the next run
        _, jobs = suite.run(Path(s["suite"]), lab, lambda t: progress.PlainProgress(prefix=f"[{s['name']} {t}] "),
                            busy=busy, created=created)
        _retain(lab, log)
        return [j["id"] for j in jobs]

    stopping: list[bool] = []

    def stop(signum, frame) -> None:
        stopping.append(True)
        if scheduler is not None:
            scheduler.stopping = True

    scheduler = None
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # started while the results database is away: wait for it (said once), as the running scheduler does
    store = outage.patiently(_store, outage.Outages(log), lambda: bool(stopping))
    scheduler = Scheduler(store, fire, log, **_healing(args, log))
    scheduler.stopping = bool(stopping)
    try:
        _retain(load_lab(args), log)
    except PanioError:
        pass  # no lab file yet: nothing to retain by
    from controller import backends

    if backends.broker_url():  # imported here, once: two schedules' threads importing celery's lazy module at the
        from celery import Celery  # noqa: F401  same moment failed ("cannot import name 'Celery'") in the night
    scheduler.serve()


def _healing(args: argparse.Namespace, log) -> dict:
    """What the scheduler needs to re-check bad targets on its own (docs/operations.md, Health checks)."""
    from controller import backends
    from controller.jobs import checks, progress

    said: dict[str, str] = {}

    def due() -> list[str]:
        from bench_agent.health.state import HealthStore

        return checks.due_rechecks(load_lab(args), HealthStore(backends.results_url()), time.time())

    def recheck(target: str) -> str | None:
        job = checks.recheck(load_lab(args), target, progress.PlainProgress(prefix=f"[re-check {target}] "),
                             "panio schedule serve")
        if job is None:  # held for the lab: said when the reason changes, not at every look
            from bench_agent.health.state import HealthStore

            line = f"re-check of {target}: held: {HealthStore(backends.results_url()).get(target)['reason']}"
            if said.get(target) == line:
                return None
            said[target] = line
            return line
        said.pop(target, None)
        verdict = job["health"] + (f", {job['result']}" if job["result"] else "")
        return f"re-check of {target}: health check job {job['id']}: {verdict}"

    return {"due": due, "recheck": recheck}


def _retain(lab, log) -> None:
    """The lab's [retention] (at most once an hour), said in the scheduler's log."""
    from bench_agent import outage
    from controller.jobs import retention

    try:
        record = retention.auto(lab)
    except Exception as exc:
        if outage.service_down(exc) is None:
            raise
        return  # the database away: the next run retains (the scheduler's loop says the database is away)
    if record is None:
        return
    if "error" in record:
        log(f"retention failed: {record['error']['message']}")
        return
    for key, r in record["result"].items():
        if key != "rules":
            events = f", {r['health_events']} health events" if "health_events" in r else ""
            log(f"retention ({key} older than {record['result']['rules'][key]}): removed {r['jobs']} jobs, "
                f"{r['artifacts']} artifacts{events}")
