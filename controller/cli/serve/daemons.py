"""panio daemons [stop NAME|--all]: list and stop this host's panio daemons, strays included."""

from __future__ import annotations

import argparse

from bench_agent.errors import UsageError
from controller.cli.common import add_json, add_param, command, print_json, say, subcommands

HELP = """\
List this lab's panio daemons on this host (serial and video capture, HID rigs)
from their discovery files, with strays (a daemon process whose file is gone)
and stale files (a file whose process is gone); daemons still running from
before panio kept state per lab are listed as legacy-NAME. Another lab's
daemons are never listed. `panio daemons stop NAME` stops one."""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = HELP
    p.epilog = "example:\n  panio daemons --json\n  panio daemons stop serial-pico\n\nsee also: panio serial stop, docs/serial.md"
    add_json(p)
    sub = subcommands(p)
    p.set_defaults(func=list_)
    c = command(sub, "stop", "stop a daemon by name, or all of them", func=stop,
                example=["panio daemons stop serial-pico", "panio daemons stop --all --force"],
                see_also="panio daemons (names), panio serial stop")
    c.add_argument("name", metavar="NAME", nargs="?", help="a name from `panio daemons` (e.g. serial-pico, stray-1234)")
    c.add_argument("--all", action="store_true", help="stop every daemon listed")
    add_param(c, "daemons.stop", "force")
    add_json(c)


def _local(args: argparse.Namespace, op: str, op_args: dict) -> list:
    from controller.cli.common import lab_if_any
    from controller.dispatch import Dispatcher

    # the lab's daemons (its key picks its state directory on this host); no lab file: the bare state directory's
    return Dispatcher(lab_if_any(args)).call_host(None, op, op_args)  # daemons are this host's


def list_(args: argparse.Namespace) -> None:
    rows = _local(args, "daemons.list", {})
    if args.json:
        print_json(rows)
        return
    if not rows:
        say("no panio daemons running")
        return
    for r in rows:
        what = f"target {r['target']}" if r.get("target") else ""
        extra = f", epoch {r['epoch']}" if r.get("epoch") is not None else ""
        say(f"{r['name']}  {r['state']}  pid {r['pid']}  {what}{extra}".rstrip())
        if r["state"] != "running":
            say(f"    {r.get('command') or r.get('file')}")
        if r.get("legacy"):
            say(f"    started before panio kept state per lab (in {r['state_dir']}): stop it with "
                f"`panio daemons stop {r['name']}`, then start it again in this lab")


def stop(args: argparse.Namespace) -> None:
    if bool(args.name) == bool(args.all):
        raise UsageError("name one daemon or give --all", hint="see `panio daemons` for names")
    rows = _local(args, "daemons.stop", {"names": None if args.all else [args.name], "force": args.force})
    if args.json:
        print_json(rows)
        return
    if not rows:
        say("no panio daemons running")
    for r in rows:
        say(f"{'stopped' if r.get('stopped') else 'cleaned up'} {r['name']} (pid {r['pid']}, {r['how']})")
