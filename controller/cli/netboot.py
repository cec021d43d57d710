"""panio netboot set|rm|tftp-root: the network-boot channel of a target."""

from __future__ import annotations

import argparse
import os

from controller.cli.common import add_json, add_target_option, add_target_positional, command, load_lab, print_json, say, subcommands
from controller.lab import edit, edits
from bench_agent.paths import state_dir


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Network boot: the target fetches its kernel over TFTP through a dedicated\n"
        "network interface of the control host (never its primary NIC)."
    )
    sub = subcommands(p)
    c = command(sub, "set", "set the netboot interface and TFTP root of a target", func=set_,
                example="panio netboot set -t pico --interface en7 --tftp-root ~/tftp/pico",
                see_also="panio netboot tftp-root, panio netboot rm")
    add_target_option(c)
    c.add_argument("--interface", metavar="IFACE", help="the control host's interface wired to the target (required the first time)")
    c.add_argument("--tftp-root", metavar="DIR", help="folder served over TFTP (default: panio's state dir, tftp/TARGET)")

    c = command(sub, "rm", "remove the netboot channel of a target", func=rm,
                example="panio netboot rm -t pico", see_also="panio netboot set")
    add_target_option(c)

    c = command(sub, "tftp-root", "print the folder a target netboots from (copy kernels there)", func=tftp_root,
                example="panio netboot tftp-root pico", see_also="panio netboot set --tftp-root")
    add_target_positional(c)
    add_json(c)


def effective_root(target: str, netboot: dict) -> str:
    root = netboot.get("tftp_root")
    return os.path.expanduser(root) if root else str(state_dir() / "tftp" / target)


def set_(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if "netboot" not in t:
            if not args.interface:
                raise edits.NotConfigured(f"target {args.target!r} has no netboot channel yet: give --interface",
                                          hint=f"panio netboot set -t {args.target} --interface IFACE")
            t["netboot"] = edits.new_table({"interface": args.interface, "tftp_root": args.tftp_root})
            changed = ["interface"] + (["tftp_root"] if args.tftp_root else [])
        else:
            changed = edits.set_fields(t["netboot"], {"interface": args.interface, "tftp_root": args.tftp_root})
    say(f"netboot on {args.target}: " + (f"set {', '.join(changed)}" if changed else "nothing to change"))


def rm(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if "netboot" not in t:
            raise edits.NotConfigured(f"target {args.target!r} has no netboot channel", target=args.target)
        del t["netboot"]
    say(f"removed netboot from {args.target}")


def tftp_root(args: argparse.Namespace) -> None:
    lab = load_lab(args)
    netboot = lab.channel(args.target, "netboot")
    root = effective_root(args.target, netboot)
    if args.json:
        print_json({"target": args.target, "tftp_root": root, "exists": os.path.isdir(root), "interface": netboot["interface"]})
    else:
        say(root)
