"""panio netif mode|down-hard|status: a target's dedicated network link (its netboot interface).

Each command's plan reads the target's netboot table; its body
(``bench_agent.commands.netif``) calls the ``netif.<verb>`` operation with
it on the host that owns the link, where the link and its hard-down backend
live.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, add_param, add_target_positional, command, subcommands
from controller.cli.runtime import Step, runtime

SEE = "panio netboot, panio power-cycle, docs/netboot.md"
SOFT_HARD = ("`mode off` is a soft (administrative) down: the carrier can stay up when\n"
             "Wake-on-LAN keeps the adapter's PHY powered, so the target may never notice.\n"
             "`down-hard` cuts the adapter's power (usb-sysfs, uhubctl or a hook; see\n"
             "`panio netboot set --hard-down`), so the target sees link loss.")


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = ("A target's dedicated link (the netboot interface): bring it up, hand it over\n"
                     "to ffx, take it down softly or hard, and read its state. Drive the link\n"
                     "through panio, not ip/ifconfig by hand.\n\n" + SOFT_HARD)
    sub = subcommands(p)
    c = command(sub, "mode", "set the link's mode: link (bare link up), ffx (netboot off, IPv6 link-local), off (soft down)",
                func=mode, example=["panio netif mode link pico", "panio netif mode ffx pico"],
                see_also=f"panio netif status, panio netif down-hard, {SEE}",
                details="ffx stops netboot first: they are exclusive, so a power-cycle then falls\n"
                        "through to the SD card. link and ffx also undo a down-hard.\n\n" + SOFT_HARD)
    c.add_argument("mode", choices=_spec_choices("netif.mode", "mode"), metavar="MODE",
                   help=", ".join(_spec_choices("netif.mode", "mode")))
    add_target_positional(c)
    add_json(c)

    c = command(sub, "down-hard", "cut the link adapter's power so the target sees link loss",
                func=down_hard, example="panio netif down-hard pico",
                see_also=f"panio netif mode link (brings it back), panio netif status, {SEE}", details=SOFT_HARD)
    add_target_positional(c)
    add_json(c)

    c = command(sub, "status", "the link's mode, carrier, addresses and the target's fe80:: address for ffx",
                func=status, example=["panio netif status pico", "panio netif status pico --json"],
                see_also=f"panio netif mode ffx, {SEE}",
                details="The target's IPv6 link-local address comes from an all-nodes ping on the link\n"
                        "and the neighbour table, printed as a ready-to-paste `ffx target add fe80::...%IFACE`.")
    add_target_positional(c)
    add_param(c, "netif.status", "probe", help="read the neighbour table only; send nothing on the link")
    add_json(c)


def _spec_choices(op: str, name: str) -> tuple[str, ...]:
    from bench_agent import ops

    return tuple(ops.spec(op).param(name).choices)


# -- plans (the bodies are in bench_agent.commands.netif) -------------------------------------------


def _plan(args: argparse.Namespace, lab: Any, command: str, opts: dict[str, Any]) -> Step:
    netboot = dict(lab.channel(args.target, "netboot"))
    return Step(command, args.target, {"target": args.target, "json": args.json, "netboot": netboot, **opts})


@runtime
def mode(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "netif.mode", {"mode": args.mode})


@runtime
def down_hard(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "netif.down_hard", {})


@runtime
def status(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "netif.status", {"probe": args.probe})
