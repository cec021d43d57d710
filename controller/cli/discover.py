"""panio discover: this host's hardware that could be wired into the lab."""

from __future__ import annotations

import argparse

from controller.cli.common import add_json, print_json, say


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


def inventory(args: argparse.Namespace) -> dict:
    if args.host:
        from controller import dispatch
        from controller.cli.common import load_lab

        return dispatch.call_host(load_lab(args), args.host, "system.discover", {})
    from bench_agent.inventory import inventory as local

    return local()


def run(args: argparse.Namespace) -> None:
    inv = inventory(args)
    if args.json:
        print_json(inv)
        return
    say("serial ports:" if inv["serial"] else "serial ports: none")
    for p in inv["serial"]:
        say(f"  {p['by_id'] or p['device']}  {p['vid_pid'] or '-'}  {p['description']}")
    say("video capture:" if inv["video"] else "video capture: none")
    for v in inv["video"]:
        say(f"  {v['by_id'] or v['device']}  {v['name']}")
    say("keyboard/mouse rigs:" if inv.get("hid") else "keyboard/mouse rigs: none")
    for h in inv.get("hid", []):
        say(f"  {h['device']}  {h['kind']}" + (f"  {h['usb']}" if h.get("usb") else ""))
    say("USB devices:" if inv.get("usb") else "USB devices: none")
    for u in inv.get("usb", []):
        label = " ".join(x for x in (u["manufacturer"], u["product"]) if x) or "-"
        extra = "  ".join(x for x in (f"serial {u['serial']}" if u["serial"] else "", u["role"]) if x)
        say(f"  {u['vid']}:{u['pid']}  {u['path']:<10} {label}" + (f"  ({extra})" if extra else ""))
    say("network links:" if inv["network"] else "network links: none")
    for n in inv["network"]:
        tags = ", ".join(t for t, on in (("primary: not for netboot", n["primary"]), ("usb", n["usb"]),
                                          ("carrier", n["carrier"])) if on)
        say(f"  {n['interface']}  {n['mac']}  {n['state']}" + (f"  ({tags})" if tags else ""))
    if inv["adb"] is None:
        say("adb: not installed")
    else:
        say("adb devices: " + (", ".join(d["serial"] for d in inv["adb"]) or "none"))
