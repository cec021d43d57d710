"""panio helper: list the bundled helper programs, or run one with its arguments verbatim."""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, print_json, say


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "List the helper programs bundled with panio, or run one. Helpers are small\n"
        "tools that sit behind generic hooks (there is no `panio shelly`: a Shelly plug\n"
        "is `shellyplug` in a power hook). Each is also installed as its own command,\n"
        "so a hook calls it by name. Arguments after NAME go to the helper verbatim."
    )
    p.epilog = ("example:\n  panio helper\n  panio helper shellyplug -d 192.0.2.41 state\n"
                "  panio power set -t pico --cycle-cmd \"shellyplug -d 192.0.2.41 cycle\"\n\n"
                "see also: panio power set, docs/helpers.md")
    add_json(p)
    p.add_argument("name", nargs="?", metavar="NAME", help="the helper to run (omit to list them)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="passed to the helper verbatim")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench_agent import helpers

    if args.name is None:
        return _list(helpers.listing(), args.json)
    return helpers.runner(args.name)(list(args.args))


def _list(items: list[dict[str, str]], as_json: bool) -> int:
    if as_json:
        print_json(items)
        return 0
    width = max(len(h["name"]) for h in items) + 2
    for h in items:
        say(f"{h['name'].ljust(width)}{h['summary']}  (e.g. {h['example']})")
    say("\nRun one: panio helper NAME ARGS...  (or NAME directly; each is installed as a command)")
    return 0
