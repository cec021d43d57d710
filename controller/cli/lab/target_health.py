"""panio target health [TARGET] [--set H --reason R] [--check]: device health, its history, health checks.

Health lives in the results database (``bench_agent.health.state``); a target's
health-check job is named in the lab file and runs like any job (in this
process, or on the target's worker with a broker).
"""

from __future__ import annotations

import argparse
import time

from controller.cli.common import add_json, command, load_lab, positive_int, print_json, say

DETAILS = """\
Health says whether the lab can vouch for a target: good, bad (its health check
failed), maintenance (an operator took it out) or unknown (never checked, or a
job on it ended incomplete). No new job runs on a bad or maintenance target:
a job run alone waits for it, a suite's jobs are skipped (on_unhealthy in the
suite or job file changes it) until a health check passes or maintenance is lifted.

A target may name a health-check job in the lab file:
  [targets.pico.health_check]
  job = "checks/pico.toml"   # relative to the lab file
  every_s = 86400            # also run it before a job when the last check is older
  retry_s = 60               # re-check a board an automatic check made bad (doubling,
  retry_max_s = 1800         #   up to retry_max_s; `panio schedule serve` runs it)
It runs before a job while the health is unknown, right after a job ends
incomplete, when maintenance is lifted (unless --no-check) and with --check
(without TARGET: every target that names one; for cron or a systemd timer).
Lifting maintenance of a target with a health check sets it unknown and runs the check.
An automatic check never runs while the lab is plainly at fault (capture stopped,
plug off, host silent): the target is held bad with that as the reason."""


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "health", "show or set a target's health (good|bad|maintenance|unknown) and its history",
                func=health, details=DETAILS,
                example=["panio target health", "panio target health pico --json",
                         "panio target health pico --set maintenance --reason 'reflashing the BMC'",
                         "panio target health pico --set good   # lifts maintenance; runs the health check"],
                see_also="panio job list, panio suite run, docs/operations.md")
    c.add_argument("name", metavar="TARGET", nargs="?", help="the target (default: every target, current health only)")
    c.add_argument("--set", dest="set_to", choices=("good", "bad", "maintenance", "unknown"), help="set its health")
    c.add_argument("--reason", metavar="TEXT", help="why (recorded with who set it and when)")
    c.add_argument("--check", action="store_true",
                   help="run the target's health-check job now and wait for it (no TARGET: every target's)")
    c.add_argument("--no-check", action="store_true", help="with --set: do not run the health check now")
    c.add_argument("--history", type=positive_int, default=10, metavar="N", help="show the last N changes")
    add_json(c)


def _store():
    from bench_agent.health.state import HealthStore
    from controller import backends

    return HealthStore(backends.results_url())


def _who() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def health(args: argparse.Namespace) -> None:
    from bench_agent.errors import UsageError

    lab = load_lab(args)
    if args.name is None:
        if args.set_to:
            raise UsageError("--set needs a TARGET", hint="see `panio target health --help`")
        return _check_all(lab, args) if args.check else _list(lab, args)
    lab.target(args.name)
    if args.no_check and not args.set_to:
        raise UsageError("--no-check goes with --set")
    if args.reason and not args.set_to:  # else the reason would be dropped without a word
        raise UsageError("--reason goes with --set", hint=f"panio target health {args.name} --set maintenance "
                                                          "--reason TEXT")
    if args.set_to and not args.reason and args.set_to != "good":
        raise UsageError(f"--set {args.set_to} needs --reason TEXT (it is recorded and shown to everyone)")
    check_job = None
    if args.set_to:
        check_job = _set(lab, args)
    elif args.check:
        check_job = _run_check(lab, args)
    _show(args, check_job)


def _set(lab, args: argparse.Namespace) -> dict | None:
    from controller.jobs import health as controller_health

    _, _, check_now = controller_health.operator_set(lab, _store(), args.name, args.set_to, args.reason, _who(),
                                                     skip_check=args.no_check)
    return _run_check(lab, args) if check_now else None


def _run_check(lab, args: argparse.Namespace) -> dict:
    """Run the target's health check now and wait for it (``controller.jobs.checks``)."""
    from controller.jobs import checks, progress

    show = (lambda e, d: None) if args.json else progress.PlainProgress()
    return checks.run_check(lab, args.name, show)


def _show(args: argparse.Namespace, check_job: dict | None) -> None:
    store = _store()
    record, history = store.get(args.name), store.history(args.name, args.history)
    if args.json:
        out = {**record, "history": history}
        if check_job is not None:
            out["health_check_job"] = {k: check_job[k] for k in ("id", "name", "health", "result", "reason")}
        print_json(out)
    else:
        from bench_agent.health.state import describe

        if check_job is not None:
            verdict = check_job["health"] + (f", {check_job['result']}" if check_job["result"] else "")
            say(f"health check job {check_job['id']} ({check_job['name']}): {verdict}")
        say(f"{args.name}: {describe(record)}")
        for e in history:
            say(f"  {_when(e['at'])}  {e['previous'] or '-'} -> {e['health']}  by {e['set_by']}: {e['reason']}")
    if check_job is not None:
        from controller.jobs import report

        err = report.ci_error(check_job)
        if err is not None:
            raise err


def _check_all(lab, args: argparse.Namespace) -> None:
    """Every target that names a health check, one after the other (for cron or a systemd timer)."""
    from controller.jobs import health as controller_health
    from controller.jobs import report

    names = [n for n in lab.targets if controller_health.check_path(lab, n) is not None]
    if not names:
        from bench_agent.errors import NotConfigured

        raise NotConfigured(f"no target in {lab.path} names a health check",
                            hint="add [targets.NAME.health_check] job = FILE (docs/operations.md)")
    jobs = []
    for name in names:
        args.name = name
        jobs.append(_run_check(lab, args))
    store = _store()
    if args.json:
        print_json([{**store.get(j["target"]), "health_check_job": j["id"]} for j in jobs])
    else:
        from bench_agent.health.state import describe

        for j in jobs:
            say(f"{j['target']:<16} {describe(store.get(j['target']))}")
    errors = [e for e in (report.ci_error(j) for j in jobs) if e is not None]
    if errors:
        raise errors[0]


def _list(lab, args: argparse.Namespace) -> None:
    from bench_agent.health.state import describe

    store = _store()
    known = store.all()
    rows = [known.get(n) or store.get(n) for n in lab.targets]
    if args.json:
        print_json(rows)
        return
    if not rows:
        say(f"no targets in {lab.path}")
    for r in rows:
        say(f"{r['target']:<16} {describe(r)}")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
