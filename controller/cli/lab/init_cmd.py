"""panio init: create a lab file."""

from __future__ import annotations

import argparse
import os

from bench_agent.errors import AlreadyExists, ConfigInvalid
from controller.cli.common import say
from controller.lab.store import write_atomic

TEMPLATE = """\
# panio lab file: what is wired where. Edit it with the panio config commands
# (they keep your comments) or by hand; `panio config show` checks and prints it.
# Reference: docs/lab-file.md, or `panio skill`.

# [hosts.bench1]
# ssh = "user@bench1.local"

# [targets.pico]
# description = "Raspberry Pi 5 on bench 1"
"""


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Create a lab file with a commented template.\n\n"
        "The path is --lab PATH, else $PANIO_LAB, else ~/.config/panio/lab.toml.\n"
        "An existing file is left alone unless --force is given."
    )
    p.epilog = "example:\n  panio init\n  panio --lab ./lab.toml init\n\nsee also: panio target add, panio config show"
    p.add_argument("--force", action="store_true", help="replace an existing lab file with the empty template")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = args.lab_path
    if os.path.exists(path) and not args.force:
        raise AlreadyExists(f"a lab file already exists at {path}", hint="keep it, or replace it with `panio init --force`", file=str(path))
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        from controller.lab.store import locked

        with locked(path):
            write_atomic(path, TEMPLATE)
    except OSError as exc:  # a folder on the way that is a file, or cannot be made (read-only, /proc)
        raise ConfigInvalid(f"cannot create {path}: {exc.strerror or exc}", file=str(path),
                            hint="pick a lab path in a folder you can write: --lab PATH or $PANIO_LAB") from None
    say(f"created {path}")
    if args.lab_source == "default" and not os.environ.get("PANIO_LAB"):
        say("next: panio target add NAME   (see `panio skill`)")
    return 0
