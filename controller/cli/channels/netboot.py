"""panio netboot set|rm|tftp-root: the network-boot channel of a target.

The runtime commands (netboot start|stop|status) register from
``controller.cli.channels.netboot_runtime``; ``tftp-root`` is planned here, its body is
``bench_agent.commands.netboot``.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench_agent.errors import NotConfigured, UsageError
from controller.cli.common import (add_field, add_json, add_target_option, add_target_positional, command, say,
                                   subcommands)
from controller.cli.runtime import Step, runtime
from controller.lab import edit, edits

PI5 = ("Raspberry Pi 5: copy the kernel as kernel_2712.img into the TFTP root; panio's\n"
       "DHCP answers its bootloader with option 43 \"Raspberry Pi Boot\" (unless --boot-file\n"
       "is set), and the EEPROM's BOOT_ORDER must try network boot (e.g. 0xf12). docs/netboot.md")


def register(p: argparse.ArgumentParser, name: str) -> None:
    p.description = (
        "Network boot: the target fetches its kernel over TFTP through a dedicated\n"
        "network interface of the control host (never its primary NIC).\n\n" + PI5
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = subcommands(p)
    c = command(sub, "set", "set the netboot interface and TFTP root of a target", func=set_,
                example=["panio netboot set -t pico --interface en7 --tftp-root ~/tftp/pico",
                         "panio netboot set -t qemu --interface lo --server panio --tftp-port 6969",
                         'panio netboot set -t pico --hard-down hook --hard-down-cmd "relay 2 off" '
                         '--hard-up-cmd "relay 2 on"'],
                see_also="panio netboot start, panio netboot tftp-root, panio netif, docs/netboot.md",
                details="An empty value removes an optional setting: --boot-file ''.")
    add_target_option(c)
    c.add_argument("--interface", metavar="IFACE", help="the control host's interface wired to the target (required the first time)")
    c.add_argument("--tftp-root", metavar="DIR", help="folder served over TFTP, never / nor a system or home folder "
                   "(default: panio's state dir, tftp/TARGET)")
    c.add_argument("--stage-from", metavar="DIR", help="folder `netboot stage` may take files from (symlinks are "
                   "resolved; never a system or home folder; default: none, staging refused)")
    c.add_argument("--server", choices=("dnsmasq", "panio"),
                   help="dnsmasq: DHCP+TFTP, needs root (default); panio: panio's own TFTP only, no root")
    c.add_argument("--address", metavar="CIDR", help="the host's address on the link (default 10.233.0.1/24)")
    add_field(c, "NETBOOT", "tftp_port", metavar="PORT", help="TFTP port of the panio server",
              fallback="bench_agent.netboot.settings:TFTP_PORT")
    c.add_argument("--boot-file", metavar="FILE", help="DHCP boot file for PXE/iPXE/U-Boot boards "
                   "(default: none, answer Raspberry Pi firmware)")
    c.add_argument("--hard-down", choices=("usb-sysfs", "uhubctl", "hook"),
                   help="how `netif down-hard` cuts the adapter's power (default: hook if set, else usb-sysfs)")
    c.add_argument("--usb-port", metavar="DEV", help="the adapter's USB device path, e.g. 1-1.2 (default: found from the interface)")
    c.add_argument("--hard-down-cmd", metavar="CMD", help="hook that cuts the link's power (run without a shell)")
    c.add_argument("--hard-up-cmd", metavar="CMD", help="hook that restores it")

    c = command(sub, "rm", "remove the netboot channel of a target", func=rm,
                example="panio netboot rm -t pico", see_also="panio netboot set")
    add_target_option(c)

    c = command(sub, "tftp-root", "print the folder a target netboots from (copy kernels there)", func=tftp_root,
                example="panio netboot tftp-root pico", see_also="panio netboot set --tftp-root, panio netboot start",
                details=PI5)
    add_target_positional(c)
    add_json(c)

    from controller.cli.channels import netboot_runtime

    netboot_runtime.register(sub)


OPTIONAL = ("tftp_root", "stage_from", "server", "address", "tftp_port", "boot_file", "hard_down", "usb_port",
            "hard_down_cmd", "hard_up_cmd")


CHECKED = ("interface", "tftp_root", "stage_from", "address", "boot_file", "usb_port")  # config files, sysfs, served


def _values(args: argparse.Namespace) -> dict:
    """The flags given, each checked by the rule the lab file and the host apply (``bench_agent.netboot.values``)."""
    from bench_agent.netboot import values as rules

    values = {key: getattr(args, key) for key in OPTIONAL}
    for key in CHECKED:
        given = getattr(args, key)
        if given:  # '' removes an optional setting
            try:
                getattr(rules, key)(given)
            except rules.BadValue as exc:
                raise UsageError(f"--{key.replace('_', '-')}: {exc}", argument=key) from None
    return values


def _local_root_problem(root: str, rule: str = "served_root") -> str | None:
    """Why a TFTP root (or a stage_from folder: ``rule="stage_root"``) on this machine, as it is on disk (a file,
    a symlink into a system folder), is not served."""
    from bench_agent.netboot import values as rules

    try:
        getattr(rules, rule)(root)
    except rules.BadValue as exc:
        return str(exc)
    return None


def set_(args: argparse.Namespace) -> None:
    values = _values(args)
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if args.tftp_root and not t.get("host"):  # the folder is here: check it as the server will
            if why := _local_root_problem(args.tftp_root):
                raise UsageError(f"--tftp-root: {why}", argument="tftp_root")
        if args.stage_from and not t.get("host"):
            if why := _local_root_problem(args.stage_from, "stage_root"):
                raise UsageError(f"--stage-from: {why}", argument="stage_from")
        if "netboot" not in t:
            if not args.interface:
                raise NotConfigured(f"target {args.target!r} has no netboot channel yet: give --interface",
                                          hint=f"panio netboot set -t {args.target} --interface IFACE")
            fresh = {k: v for k, v in values.items() if v}
            t["netboot"] = edits.new_table({"interface": args.interface, **fresh})
            changed = ["interface", *fresh]
        else:
            changed = edits.set_fields(t["netboot"], {"interface": args.interface, **values})
    say(f"netboot on {args.target}: " + (f"set {', '.join(changed)}" if changed else "nothing to change"))


def rm(args: argparse.Namespace) -> None:
    with edit(args.lab_path) as doc:
        t = edits.target(doc, args.target, args.lab_path)
        if "netboot" not in t:
            raise NotConfigured(f"target {args.target!r} has no netboot channel", target=args.target)
        del t["netboot"]
    say(f"removed netboot from {args.target}")


@runtime
def tftp_root(args: argparse.Namespace, lab: Any) -> Step:
    """The root is resolved where the body runs (``bench_agent.commands.netboot``), as ``~`` and the default are;
    on this machine it must be a folder panio would serve (``bench_agent.netboot.values.served_root``)."""
    return Step("netboot.tftp_root", args.target, {"target": args.target, "json": args.json,
                                                   "netboot": dict(lab.channel(args.target, "netboot")),
                                                   "check_root": not lab.target(args.target).get("host")})
