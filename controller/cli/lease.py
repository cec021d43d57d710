"""panio lease list|break: exclusive target leases held by jobs."""

from __future__ import annotations

import argparse
import time

from controller.cli.common import add_json, command, print_json, say, subcommands


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "A job holds an exclusive lease on its target while it runs; other jobs wait and\n"
        "interactive commands on that target are refused naming the holder. Leases live\n"
        "in Redis (PANIO_REDIS_URL or PANIO_BROKER), else in file locks on this machine."
    )
    sub = subcommands(p)
    c = command(sub, "list", "list held leases: target, holder, job, fencing token, time left", func=list_,
                example="panio lease list --json", see_also="panio lease break, panio job status")
    c.add_argument("--breaks", action="store_true", help="list recorded lease breaks instead (Redis only)")
    add_json(c)
    c = command(sub, "break", "take a lease away from its holder (recorded; the holder's next step is refused)",
                func=break_, example="panio lease break pico", see_also="panio lease list, panio job cancel",
                details="Use when a holder is wedged. The job that held it stops before its next step\n"
                        "(the fencing token no longer matches) and ends incomplete.")
    c.add_argument("target", metavar="TARGET")
    add_json(c)


def _store():
    from controller.jobs import backends

    return backends.lease_store()


def list_(args: argparse.Namespace) -> None:
    store = _store()
    if args.breaks:
        records = store.breaks() if hasattr(store, "breaks") else []
        if args.json:
            print_json(records)
        elif not records:
            say("no lease breaks recorded")
        for r in records if not args.json else []:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["at"]))
            say(f"{when}  {r['target']:<12} broken by {r['broken_by']} (was {r['was'].get('holder')}, job {r['was'].get('job')})")
        return
    leases = store.list()
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

    record = _store().break_(args.target, f"{getpass.getuser()}@{socket.gethostname()}")
    if record is None:
        raise NotRunning(f"target {args.target!r} is not leased", hint="see `panio lease list`", target=args.target)
    if args.json:
        print_json(record)
    else:
        say(f"broke the lease on {args.target} (was {record['was'].get('holder')}, job {record['was'].get('job')}); recorded")
