"""panio config show: the whole lab, checked and summarised."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # argparse only for the annotations: `main` runs `config show` without it (commands.QUICK)

if TYPE_CHECKING:
    import argparse

from controller.cli.common import static, add_json, command, load_lab, print_json, say, subcommands
from controller.lab.describe import host_line, target_lines


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = "The lab file as a whole."
    sub = subcommands(p)
    c = command(sub, "show", "check the lab file and show every host, target and channel", func=show,
                example=["panio config show", "panio config show --json", "panio config show --path"],
                see_also="panio target show, docs/lab-file.md")
    add_json(c)
    c.add_argument("--path", action="store_true", help="print only the lab file's path (and where it came from)")


@static
def show(args: argparse.Namespace) -> None:
    if args.path:
        if args.json:
            print_json({"path": str(args.lab_path), "source": args.lab_source, "exists": os.path.exists(args.lab_path)})
        else:
            say(f"{args.lab_path}  (from {args.lab_source})")
        return
    lab = load_lab(args)
    if args.json:
        print_json({"path": str(lab.path), "hosts": lab.hosts, "targets": lab.targets})
        return
    say(f"lab file: {lab.path}  (from {args.lab_source})")
    if lab.hosts:
        say("\nhosts:")
        for n, h in lab.hosts.items():
            say(f"  {host_line(n, h)}")
    say("\ntargets:" if lab.targets else "\nno targets yet (add one with `panio target add NAME`)")
    for n, t in lab.targets.items():
        for line in target_lines(n, t):
            say(f"  {line}")
