"""panio netif mode|down-hard|status: a target's dedicated network link (its netboot interface).

Each command calls the ``netif.<verb>`` operation through ``controller.dispatch``
with the target's netboot table; the link and its hard-down backend live on
the host that owns it.
"""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, add_target_positional, command, load_lab, print_json, say, subcommands

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
    c.add_argument("mode", choices=("link", "ffx", "off"), metavar="MODE", help="link, ffx or off")
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
    c.add_argument("--no-probe", action="store_true", help="read the neighbour table only; send nothing on the link")
    add_json(c)


def _call(args: argparse.Namespace, op: str, extra: dict | None = None):
    from controller import dispatch

    lab = load_lab(args)
    netboot = lab.channel(args.target, "netboot")
    return dispatch.call(lab, args.target, op, {"target": args.target, "netboot": netboot, **(extra or {})})


def mode(args: argparse.Namespace) -> None:
    r = _call(args, "netif.mode", {"mode": args.mode})
    if args.json:
        print_json(r)
        return
    notes = []
    if r.get("netboot_stopped"):
        notes.append("netboot stopped")
    if r.get("hard_up"):
        notes.append("adapter power restored")
    what = {"link": "link up", "ffx": "link up for ffx (IPv6 link-local)", "off": "administratively down (soft)"}
    say(f"netif {args.target} ({r['interface']}): {what[args.mode]}" + (f"; {', '.join(notes)}" if notes else ""))
    if args.mode == "ffx":
        say(f"next: power-cycle the target, then `panio netif status {args.target}` for the ffx address")


def down_hard(args: argparse.Namespace) -> None:
    r = _call(args, "netif.down_hard")
    if args.json:
        print_json(r)
        return
    if r.get("already"):
        say(f"netif {args.target} ({r['interface']}): already hard down; `panio netif mode link {args.target}` "
            "brings it back")
        return
    extra = "; netboot stopped" if r.get("netboot_stopped") else ""
    say(f"netif {args.target} ({r['interface']}): adapter power cut via {r['hard_down']['backend']}{extra}; "
        f"`panio netif mode link {args.target}` brings it back")


def status(args: argparse.Namespace) -> None:
    st = _call(args, "netif.status", {"probe": not args.no_probe})
    if args.json:
        print_json(st)
        return
    say(f"netif {args.target}: {st['interface']}, mode {st['mode'] or 'unset'}"
        + (", netboot serving" if st["netboot_serving"] else ""))
    if not st["present"]:
        say(f"  {st['note']}")
        return
    say(f"  admin {'up' if st['admin_up'] else 'down'}, carrier {'up' if st['carrier'] else 'down'}"
        f" (operstate {st['operstate']}), mac {st['mac']}")
    say(f"  addresses  {', '.join(st['addresses']) or 'none'}")
    if st["ffx"]:
        say(f"  target     {st['target_link_local']}")
        say(f"  {st['ffx']}")
    else:
        say("  target     no IPv6 link-local neighbour answered (is it powered and booted, is the link up?)")
