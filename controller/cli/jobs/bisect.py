"""panio bisect start|resume|status|log|stop: the first build of a list that breaks a board, found by running
a job on builds (``controller.jobs.bisect``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.common import add_json, command, load_lab, positive_int, print_json, say, subcommands

DETAILS = """\
BUILDS is an ordered file, oldest first: one build a line, its name then its
artifacts (`v6.8-rc3 kernel=/srv/k/rc3/Image dtb=https://ci/rc3.dtb`, `#`
comments), or TOML ([[builds]] name = "...", kernel = "..."); or --builds-cmd,
a command that prints that list (`git rev-list --reverse v1^..v20`: names
alone), split into words and run without a shell, within 60 s; if it fails,
nothing starts (exit 2).

Each probe is the job file with ${build.ARTIFACT} (and ${build}: the name)
replaced by the build's, run as an ordinary job (lease, health, results:
`panio job status ID`).

The good build is run until it passes once on each board (the reference a
failure there is compared with), the bad build --repeat times (its failure: the
failing step and the first lines that diverge from the reference, as `panio job
triage` finds them). Then a binary search: a build is bad when a run fails with
that same failure, good when --repeat runs pass; a run the lab failed
(incomplete, canceled, timed out) or that failed another way is run again and
not counted. With --tag, probes run side by side on the tag's boards (K boards,
--repeat R: K // R builds a round, each on R boards); a run a board's fault
spoiled (its health bad, its lease or host lost) goes to another board, and
that board takes no more until its health is good again.
The state is in the results database: after a crash, `panio bisect resume ID`.

Exit status: 0 the first bad build was found; 2 the range is wrong (the good
build does not pass, the bad one never fails); 4 a build could not be judged
(its probes kept failing for the lab's reasons, or no board of the tag is
usable); 15 stopped (`bisect stop`); 3 no such bisection."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = ("Bisection: which build of an ordered list first breaks a board, found unattended by\n"
                     "running a job on builds in a binary search (flakiness-aware). See docs/bisect.md.")
    sub = subcommands(p)
    c = command(sub, "start", "bisect BUILDS between a good and a bad build with a job; blocks, prints progress",
                func=start, details=DETAILS,
                example=["panio bisect start boot.toml --target pico --good v1 --bad v20 --builds builds.txt",
                         "panio bisect start boot.toml --tag pi5 --good v1 --bad v20 --builds b.txt --repeat 3"],
                see_also="panio bisect status, panio bisect resume, panio job triage, docs/bisect.md")
    c.add_argument("file", type=Path, metavar="JOB", help="the job file; ${build.ARTIFACT} is the build's artifact")
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", metavar="TARGET", help="the board every probe runs on, one probe at a time")
    where.add_argument("--tag", metavar="TAG", help="probes run side by side on the boards carrying TAG; a run "
                                                    "a board's fault spoiled goes to another of them")
    c.add_argument("--good", required=True, metavar="BUILD", help="a build that passes the job")
    c.add_argument("--bad", required=True, metavar="BUILD", help="a later build that fails it")
    listed = c.add_mutually_exclusive_group(required=True)
    listed.add_argument("--builds", type=Path, metavar="LIST", help="the ordered builds file")
    listed.add_argument("--builds-cmd", metavar="CMD",
                        help="a command that prints the builds list (as the file would be), run without a shell, "
                             "at most 60 s")
    c.add_argument("--repeat", type=positive_int, default=1, metavar="K",
                   help="runs a build must pass to be good; 3 for a flaky board")
    add_json(c)
    c = command(sub, "resume", "continue a bisection whose process stopped or died, from the database",
                func=resume, example="panio bisect resume 3", see_also="panio bisect status, panio bisect start")
    c.add_argument("id", type=positive_int, metavar="ID")
    add_json(c)
    for verb, summary, func in (("status", "the range, the first bad build once found, the probes' verdicts", status),
                                ("log", "every probe: build, job, verdict and why, oldest first", log)):
        c = command(sub, verb, summary, func=func, example=[f"panio bisect {verb}", f"panio bisect {verb} 3 --json"],
                    see_also="panio bisect start, panio job triage")
        c.add_argument("id", type=positive_int, nargs="?", metavar="ID", help="the bisection (default: the newest)")
        add_json(c)
    c = command(sub, "stop", "stop a running bisection after its current probe (resume continues it)", func=stop,
                example="panio bisect stop 3", see_also="panio bisect resume")
    c.add_argument("id", type=positive_int, nargs="?", metavar="ID", help="the bisection (default: the newest)")
    add_json(c)


def _stores():
    from bench_agent.results.bisects import BisectStore
    from controller import backends

    return BisectStore(backends.results_url()), backends.results_store()


def _id(args: argparse.Namespace, store) -> int:
    from bench_agent.errors import NotConfigured

    found = args.id or store.latest()
    if found is None:
        raise NotConfigured("no bisection yet", hint="start one: panio bisect start JOB --target T --good ...")
    return found


def start(args: argparse.Namespace) -> None:
    from controller.jobs import bisect
    from controller.lab import tomlfile

    lab = load_lab(args)
    boards = bisect.boards(lab, {"target": args.target, "tag": args.tag})
    listed = bisect.parse_builds(args.builds) if args.builds else bisect.builds_from_command(args.builds_cmd)
    builds = bisect.select(listed, args.good, args.bad)
    text = tomlfile.read(args.file, "job file")
    for b in builds:  # every build's job is checked before the first probe runs
        job = bisect.job_for(text, str(args.file), b)
        from controller.jobs import spec

        spec.compile_steps(job)
    store, _ = _stores()
    bisect_id = store.create(str(args.file), text, args.target, builds, args.repeat, tag=args.tag)
    if not args.json:
        on = args.target or f"tag {args.tag} ({', '.join(boards)})"
        say(f"bisect {bisect_id}: {len(builds)} builds from {args.good} (good) to {args.bad} (bad) on "
            f"{on}, {args.repeat} run(s) a build; `panio bisect resume {bisect_id}` continues it")
    _drive(args, lab, bisect_id)


def resume(args: argparse.Namespace) -> None:
    from bench_agent.errors import UsageError
    from controller.jobs import bisect

    store, _ = _stores()
    rec = store.get(args.id)
    if rec["state"] == "done":
        raise UsageError(f"bisection {args.id} is done: first bad build {rec['builds'][rec['bad']]['name']}",
                         hint=f"panio bisect status {args.id}")
    lab = load_lab(args)
    bisect.boards(lab, rec)  # its target, or a board of its tag, is still in the lab
    store.update(args.id, state="running", reason=None)
    _drive(args, lab, args.id)


def _drive(args: argparse.Namespace, lab, bisect_id: int) -> None:
    from controller.jobs import bisect

    store, results = _stores()
    show = (lambda line: None) if args.json else say
    rec = bisect.Bisection(store, results, lab, bisect_id, show).run()
    r = bisect.report(store.get(rec["id"]))
    if args.json:
        print_json(r)
        return
    say("\n".join(_lines(r)))


def status(args: argparse.Namespace) -> None:
    from controller.jobs import bisect

    store, _ = _stores()
    r = bisect.report(store.get(_id(args, store)))
    if args.json:
        print_json(r)
        return
    say("\n".join(_lines(r)))


def log(args: argparse.Namespace) -> None:
    from controller.jobs import bisect

    store, _ = _stores()
    r = bisect.report(store.get(_id(args, store)))
    if args.json:
        print_json(r["probes"])
        return
    say("\n".join(_probe_lines(r)) or f"bisect {r['id']}: no probe yet")


def stop(args: argparse.Namespace) -> None:
    from bench_agent.errors import UsageError

    store, _ = _stores()
    bisect_id = _id(args, store)
    rec = store.get(bisect_id)
    if rec["state"] != "running":
        raise UsageError(f"bisection {bisect_id} is {rec['state']}, not running", hint=f"panio bisect status {bisect_id}")
    store.update(bisect_id, state="stopped", reason="stopped by `panio bisect stop`")
    if args.json:
        print_json({"id": bisect_id, "state": "stopped"})
    else:
        say(f"bisect {bisect_id}: stopped (after its current probe); `panio bisect resume {bisect_id}` continues it")


def _lines(r: dict) -> list[str]:
    on = r["target"] or f"tag {r['tag']}"
    out = [f"bisect {r['id']} on {on} ({r['job_path']}): {r['state']}"
           + (f": {r['reason']}" if r.get("reason") else "")]
    if r["first_bad"]:
        out.append(f"  first bad build: {r['first_bad']} (last good: {r['good']}); "
                   f"{r['bisection_probes']} builds probed besides the good and bad ones")
    else:
        out.append(f"  last good {r['good']}, first bad so far {r['bad']}; {len(r['remaining'])} builds between")
    sig = r.get("signature")
    if sig:
        out.append(f"  the bad build's failure: step {sig['step']!r}: "
                   f"{'; '.join(sig['lines']) or 'no divergent line'}")
    out += ["  evidence (`panio job triage JOB` for each):"] + _probe_lines(r)
    if r["running"]:
        out += ["  running:"] + [f"    {p['build']}: job {p['job_id']} on {p['target']}" for p in r["running"]]
    return out


def _probe_lines(r: dict) -> list[str]:
    return [f"    {p['build']}: job {p['job_id']}{_on(r, p)} {p['verdict']}: {p['why']}" for p in r["probes"]]


def _on(r: dict, probe: dict) -> str:
    """Which board a probe ran on, where the bisection had several."""
    return f" on {probe['target']}" if r["tag"] and probe.get("target") else ""
