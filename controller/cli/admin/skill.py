"""panio skill [NAME] [--list] [--path]: the bundled skills."""

from __future__ import annotations

import argparse
import sys

from bench_agent.errors import NotConfigured
from controller.cli.common import add_json, print_json, say


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Print a bundled skill. `panio skill` is the main one: how panio thinks about\n"
        "a lab, which command serves which goal, and the traps to avoid. Companion\n"
        "skills cover special topics (kvm-puppeting: driving a screen with keyboard+mouse)."
    )
    p.epilog = ("example:\n  panio skill\n  panio skill kvm-puppeting\n  panio skill --path   # register it with a harness\n\n"
                "see also: panio --help, docs/skills.md")
    p.add_argument("name", nargs="?", metavar="NAME", help="a companion skill (see --list)")
    p.add_argument("--list", action="store_true", help="list the bundled skills")
    p.add_argument("--path", action="store_true", help="print the SKILL.md path instead of its text")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    import skills

    if args.list:
        rows = [{"name": n, "description": skills.description(n), "path": str(skills.path(n))} for n in skills.names()]
        if args.json:
            print_json(rows)
        else:
            for r in rows:
                say(f"{r['name']}: {r['description']}")
        return
    name = args.name or skills.MAIN
    if name not in skills.names():
        near = [n for n in skills.names() if n.startswith(name.lower())] if name else []  # `kvm` for kvm-puppeting
        hint = f"did you mean `panio skill {near[0]}`?" if len(near) == 1 else "see `panio skill --list`"
        raise NotConfigured(f"no skill {name!r} (skills: {', '.join(skills.names())})", hint=hint, skill=name)
    if args.path:
        say(str(skills.path(name)))
    elif args.json:
        print_json({"name": name, "path": str(skills.path(name)), "text": skills.path(name).read_text(encoding="utf-8")})
    else:
        sys.stdout.write(skills.path(name).read_text(encoding="utf-8"))
