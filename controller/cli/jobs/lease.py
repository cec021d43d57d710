"""panio lease list|break: exclusive target leases held by jobs."""

from __future__ import annotations

import argparse
import time

from controller.cli.common import add_json, command, print_json, say, subcommands
from controller.cli.jobs import job_remote


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "A job holds an exclusive lease on its target while it runs; other jobs wait and\n"
        "commands that change that target are refused naming the holder, by the control\n"
        "host itself, whatever the caller's environment (see `panio lease store`). Leases\n"
        "live in Redis (PANIO_REDIS_URL or PANIO_BROKER, else the store this host recorded),\n"
        "else in file locks on this machine. Each lab's leases are its own: a lease on one\n"
        "lab's target never blocks another lab's target of the same name. list and break take\n"
        "--controller URL with an operator's token in PANIO_TOKEN (docs/ci.md)."
    )
    sub = subcommands(p)
    c = command(sub, "list", "list held leases: target, holder, job, fencing token, time left", func=list_,
                example="panio lease list --json", see_also="panio lease break, panio job status, docs/security.md",
                details="The token is shown, never the lease's secret: only the holder (a job's steps, a\n"
                        "pytest session) has it, so the number alone acts for nobody.")
    c.add_argument("--breaks", action="store_true", help="list recorded lease breaks instead (Redis only)")
    add_json(c)
    job_remote.add_flag(c)
    c = command(sub, "break", "take a lease away from its holder (recorded; the holder's next step is refused)",
                func=break_, example="panio lease break pico", see_also="panio lease list, panio job cancel",
                details="Use when a holder is wedged. The job that held it stops before its next step\n"
                        "(the fencing token no longer matches) and ends incomplete.")
    c.add_argument("target", metavar="TARGET")
    add_json(c)
    job_remote.add_flag(c)
    c = command(sub, "store", "show, record or forget the lease stores this host checks before any side effect",
                func=store, example=["panio lease store", "panio lease store --set redis://ctl.lab:6379/0"],
                see_also="panio worker, docs/security.md, docs/jobs.md (Leases)",
                details="This host refuses power, serial input and actions on a target that another holder\n"
                        "leases in any of these stores, whatever the caller's environment. `panio worker`\n"
                        "records its own store when it starts; record one by hand on a host that is only\n"
                        "reached over SSH. Kept in STATE_DIR/lease-stores.json (mode 0600).")
    c.add_argument("--set", metavar="URL", help="record a Redis lease store (redis://HOST:PORT/DB)")
    c.add_argument("--prefix", metavar="PREFIX", default=None,
                   help="its key prefix (default: PANIO_REDIS_PREFIX, else panio:)")
    c.add_argument("--forget", metavar="URL", help="stop checking this recorded store")
    add_json(c)


def _store(args: argparse.Namespace):
    """The lab's leases (another lab's target of the same name is another target); no lab file: no lab's."""
    from controller import backends
    from controller.cli.common import lab_if_any

    lab = lab_if_any(args)
    return backends.lease_store(lab.key if lab is not None else None)


def _scheduler(args: argparse.Namespace) -> list[dict]:
    """The scheduler's lease, which is no lab's (one `schedule serve` for every lab), beside a lab's own."""
    from bench_agent.paths import current_lab
    from controller import backends
    from controller.jobs.schedules import SCHEDULER_LEASE

    if current_lab() is None:
        return []  # no lab file (`_store` read it): the list is no lab's, the scheduler's included
    held = backends.lease_store(backends.NO_LAB).current(SCHEDULER_LEASE)
    return [held] if held else []


def list_(args: argparse.Namespace) -> None:
    api = job_remote.controller(args)
    store = _store(args) if api is None else None
    if args.breaks:
        if api is not None:
            records = job_remote.lease_list(args, api)
        else:
            records = store.breaks() if hasattr(store, "breaks") else []
        if args.json:
            print_json(records)
        elif not records:
            say("no lease breaks recorded")
        for r in records if not args.json else []:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["at"]))
            say(f"{when}  {r['target']:<12} broken by {r['broken_by']} (was {r['was'].get('holder')}, job {r['was'].get('job')})")
        return
    leases = store.list() + _scheduler(args) if api is None else job_remote.lease_list(args, api)
    if args.json:
        print_json(leases)
        return
    if not leases:
        say("no leases held")
    for le in leases:
        left = f"{le['ttl_left_s']:.0f}s left" if le.get("ttl_left_s") else "held"
        say(f"{le['target']:<12} {le.get('holder')}  job {le.get('job')}  token {le['token']}  {left}")


def break_(args: argparse.Namespace) -> None:
    import getpass
    import socket

    from bench_agent.errors import NotRunning

    api = job_remote.controller(args)
    if api is not None:
        answer = job_remote.lease_break(args, api)
        if args.json:
            print_json(answer)
        else:
            say(answer["message"])
        return
    record = _store(args).break_(args.target, f"{getpass.getuser()}@{socket.gethostname()}")
    if record is None:
        raise NotRunning(f"target {args.target!r} is not leased", hint="see `panio lease list`", target=args.target)
    if args.json:
        print_json(record)
    else:
        say(f"broke the lease on {args.target} (was {record['was'].get('holder')}, job {record['was'].get('job')}); recorded")


def store(args: argparse.Namespace) -> None:
    from bench_agent.errors import NotConfigured, UsageError
    from bench_agent.leases import guard as lease_guard
    from bench_agent.leases.base import redact as _redact
    from controller import backends

    if args.set and args.forget:
        raise UsageError("give --set or --forget, not both", hint="see `panio lease store --help`")
    if args.set:
        if not args.set.startswith(("redis://", "rediss://", "unix://")):
            raise UsageError(f"{args.set!r} is not a Redis URL", hint="use redis://HOST:PORT/DB", url=args.set)
        lease_guard.remember(args.set, args.prefix or backends.redis_prefix(), "panio lease store --set")
    elif args.forget and not lease_guard.forget(args.forget):
        raise NotConfigured(f"{_redact(args.forget)} is not a recorded lease store",
                            hint="see `panio lease store`", url=_redact(args.forget))
    rows = [{"kind": type(st).__name__.removesuffix("LeaseStore").lower(),
             "url": _redact(getattr(st, "url", None)) or str(getattr(st, "dir", "")),
             "prefix": getattr(st, "prefix", None), "source": why} for st, why in lease_guard.stores()]
    if args.json:
        print_json(rows)
        return
    for r in rows:
        where = f"{r['url']} (prefix {r['prefix']})" if r["prefix"] else r["url"]
        say(f"{r['kind']:<6} {where}: {r['source']}")

