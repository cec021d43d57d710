"""panio discover: this host's hardware that could be wired into the lab (body: ``bench_agent.commands.hardware``)."""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json
from controller.cli.runtime import Step, on_job_host, runtime


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "List the hardware this machine (or a control host) has for a lab: serial ports\n"
        "with stable by-id paths, video capture devices, keyboard/mouse rigs, USB devices\n"
        "by VID:PID, network links (the primary one is marked: never netboot through it)\n"
        "and adb devices. Reads only."
    )
    p.epilog = ("example:\n  panio discover\n  panio discover --json\n\n"
                "see also: panio doctor (check a target's config), panio configure (propose a target block)")
    p.add_argument("--host", metavar="HOST", help="ask this control host instead of this machine")
    add_json(p)
    p.set_defaults(func=run)


def with_host(args: argparse.Namespace) -> bool:
    return bool(args.host)  # the lab file says how to reach a host; this machine needs none


def host_step(args: argparse.Namespace, lab: Any, command: str, name: str, opts: dict[str, Any]) -> Step:
    """A step whose ``system.discover`` runs on ``--host`` (checked against the lab), else on this machine."""
    if args.host:
        lab.host(args.host)  # fails helpfully if the host is unknown
        on_job_host(args, lab, name)
    return Step(command, None, {"json": args.json, **opts}, hosts={"system.discover": args.host})


@runtime(needs_lab=with_host)
def run(args: argparse.Namespace, lab: Any) -> Step:
    return host_step(args, lab, "hardware.discover", "discover", {})
