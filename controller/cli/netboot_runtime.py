"""panio netboot start|stop|status: serve a target's kernel over DHCP/TFTP on its dedicated link.

Each command reads the target's netboot table, resolves its TFTP root and
calls the ``netboot.<verb>`` operation through ``controller.dispatch``; the
server runs as a daemon on the host that owns the link.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from controller.cli.common import add_json, add_target_positional, command, load_lab, print_json, say

SEE = "panio netboot set, panio netif, panio daemons, docs/netboot.md"
REFUSAL = ("Refuses the host's primary NIC (the interface of a default route, or one\n"
           "carrying other addresses or routes): exit 13 (refused).")


def register(sub: argparse._SubParsersAction) -> None:
    c = command(sub, "start", "serve DHCP and TFTP for a target on its dedicated interface (a supervised daemon)",
                func=start, example=["panio netboot start pico", "cp out/kernel.img \"$(panio netboot tftp-root "
                                     "pico)/kernel_2712.img\" && panio netboot start pico"],
                see_also=f"panio netboot status, panio netboot stop, {SEE}",
                details="dnsmasq (DHCP+TFTP, root) or panio's own TFTP server (--server panio, no\n"
                        "root) runs under a panio daemon until `netboot stop`; starting again is harmless.\n"
                        + REFUSAL + "\nRaspberry Pi 5: the kernel is kernel_2712.img; DHCP option 43 "
                        "\"Raspberry Pi Boot\" is sent.")
    add_target_positional(c)
    add_json(c)

    c = command(sub, "stop", "stop serving a target (the leases and log stay on disk)", func=stop,
                example="panio netboot stop pico", see_also=f"panio netboot start, {SEE}")
    add_target_positional(c)
    c.add_argument("--force", action="store_true", help="SIGKILL a server that does not stop within 10 s")
    add_json(c)

    c = command(sub, "status", "is a target's netboot served? interface, TFTP root, recent leases and files sent",
                func=status, example=["panio netboot status pico", "panio netboot status pico --tail 50 --json"],
                see_also=f"panio netboot start, {SEE}",
                details="Files a board asked for but the root lacks show as `not found`: the name to copy\n"
                        "(a Raspberry Pi asks under its serial number unless its EEPROM says otherwise).")
    add_target_positional(c)
    c.add_argument("--tail", type=_tail, default=10, metavar="N", help="recent leases and files to show (1-1000, default 10)")
    add_json(c)


def _tail(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number from 1 to 1000")
    return int(text)


def _call(args: argparse.Namespace, op: str, extra: dict[str, Any] | None = None, with_table: bool = True) -> Any:
    from controller import dispatch

    lab = load_lab(args)
    netboot = lab.channel(args.target, "netboot")
    call_args: dict[str, Any] = {"target": args.target}
    if with_table:  # the host resolves the TFTP root (`~`, the default) where it serves it
        call_args["netboot"] = netboot
    return dispatch.call(lab, args.target, op, {**call_args, **(extra or {})})


def start(args: argparse.Namespace) -> None:
    info = _call(args, "netboot.start")
    if args.json:
        print_json(info)
        return
    again = " (already running)" if info.get("already_running") else ""
    where = info["interface"] + (f" {info['address']}" if info.get("address") else "")
    port = f", TFTP port {info['tftp_port']}" if info.get("tftp_port") not in (None, 69) else ""
    say(f"netboot for {args.target}: serving{again} with {info['server']} on {where}{port}, "
        f"TFTP root {info['tftp_root']} (daemon netboot-{args.target}, pid {info['pid']})")


def stop(args: argparse.Namespace) -> None:
    result = _call(args, "netboot.stop", {"force": args.force}, with_table=False)
    if args.json:
        print_json(result)
    elif result["was_running"]:
        say(f"netboot for {args.target}: stopped (pid {result['pid']}, {result['how']})")
    else:
        say(f"netboot for {args.target}: was not running")


def status(args: argparse.Namespace) -> None:
    st = _call(args, "netboot.status", {"tail": args.tail})
    if args.json:
        print_json(st)
        return
    state = f"serving with {st['server']} (pid {st['pid']}, since {st['started']})" if st["serving"] else "not serving"
    say(f"netboot {args.target}: {state}")
    say(f"  interface  {st['interface']}" + (f"  address {st['address']}" if st.get("address") else ""))
    say(f"  tftp root  {st['tftp_root']}" + (f"  port {st['tftp_port']}" if st["tftp_port"] != 69 else ""))
    for lease in st["leases"]:
        expires = time.strftime("%H:%M:%S", time.localtime(lease["expires"]))
        say(f"  lease      {lease['ip']}  {lease['mac']}  {lease['hostname'] or '-'}  (expires {expires})")
    for ack in st["dhcp"]:
        say(f"  dhcp       {ack['time']}  {ack['ip']}  {ack['mac']}")
    for f in st["files"]:
        to = f" to {f['client']}" if f["client"] else ""
        say(f"  tftp       {f['time']}  {f['result']}  {f['file']}{to}")
    if not (st["leases"] or st["dhcp"] or st["files"]):
        say("  no leases or files served yet")
    say(f"  log        {st['log']}")
