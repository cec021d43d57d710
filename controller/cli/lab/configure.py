"""panio configure TARGET: propose a lab.toml block from a host's hardware. Writes nothing.

The proposal is made by the body (``bench_agent.commands.hardware``) from ``system.discover``.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, check_name
from controller.cli.lab.discover import host_step, with_host
from controller.cli.runtime import Step, runtime


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Propose a [targets.NAME] block for lab.toml from the hardware a host has\n"
        "(like `panio discover`). It only prints: nothing is written. Review it, then\n"
        "paste it into the lab file or apply it with the config commands."
    )
    p.epilog = ("example:\n  panio configure pico\n  panio configure pico --host bench1 >> proposal.toml\n\n"
                "see also: panio discover, panio target add, panio serial add")
    p.add_argument("target", metavar="TARGET", help="name for the proposed target")
    p.add_argument("--host", metavar="HOST", help="the control host the board is wired to (default: this machine)")
    add_json(p)
    p.set_defaults(func=run)


def _needs_lab(args: argparse.Namespace) -> bool:
    check_name("target", args.target)  # an invalid name is refused first, whatever the lab file
    return with_host(args)


@runtime(needs_lab=_needs_lab)
def run(args: argparse.Namespace, lab: Any) -> Step:
    check_name("target", args.target)
    return host_step(args, lab, "hardware.configure", "configure", {"target": args.target, "host": args.host})
