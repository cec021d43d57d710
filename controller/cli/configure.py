"""panio configure TARGET: propose a lab.toml block from a host's hardware. Writes nothing."""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, print_json, say
from controller.cli.discover import inventory


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


def propose(target: str, host: str | None, inv: dict) -> dict:
    block: dict = {}
    if host:
        block["host"] = host
    serial = [{"name": "console" if i == 0 else f"uart{i}", "device": p["by_id"] or p["device"], "baud": 115200}
              for i, p in enumerate(inv["serial"])]
    if serial:
        block["serial"] = serial
    links = [n for n in inv["network"] if n["usb"] and not n["primary"]]
    if links:
        block["netboot"] = {"interface": links[0]["interface"]}
    if inv["video"]:
        block["video"] = {"device": inv["video"][0]["by_id"] or inv["video"][0]["device"]}
    return block


def to_toml(target: str, block: dict) -> str:
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"proposed by `panio configure {target}`: review, then paste into lab.toml"))
    targets = tomlkit.table(is_super_table=True)
    targets[target] = block
    doc["targets"] = targets
    return doc.as_string()


def run(args: argparse.Namespace) -> None:
    from controller.cli.common import check_name

    check_name("target", args.target)
    block = propose(args.target, args.host, inventory(args))
    if args.json:
        print_json({"target": args.target, "proposal": block, "written": False})
        return
    say(to_toml(args.target, block).rstrip())
    if not any(k in block for k in ("serial", "netboot", "video")):
        say("# no serial ports, USB network links or capture devices found: add channels by hand")
    say("# nothing was written")
