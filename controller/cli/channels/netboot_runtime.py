"""panio netboot start|stop|status|stage: serve a target's kernel over DHCP/TFTP on its dedicated link.

Each command's plan reads the target's netboot table; its body
(``bench_agent.commands.netboot``) calls the ``netboot.<verb>`` operation on
the host that owns the link, which resolves the TFTP root and runs the server
as a daemon.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.common import add_json, add_param, add_target_positional, command
from controller.cli.runtime import Step, runtime, spec_args

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
    add_param(c, "netboot.stop", "force")
    add_json(c)

    c = command(sub, "status", "is a target's netboot served? interface, TFTP root, recent leases and files sent",
                func=status, example=["panio netboot status pico", "panio netboot status pico --tail 50 --json"],
                see_also=f"panio netboot start, {SEE}",
                details="Files a board asked for but the root lacks show as `not found`: the name to copy\n"
                        "(a Raspberry Pi asks under its serial number unless its EEPROM says otherwise).")
    add_target_positional(c)
    add_param(c, "netboot.status", "tail", metavar="N")
    add_json(c)

    c = command(sub, "stage", "put a file (a build's kernel) into a target's TFTP root, from its stage_from folder",
                func=stage, example=["panio netboot stage pico /srv/builds/v6.9/Image --as kernel_2712.img",
                                     "panio netboot stage ${target} ${build.kernel} --as kernel8.img   # a job step",
                                     "panio netboot stage pico /srv/builds/pxe/default --as pxelinux.cfg/default"],
                see_also=f"panio netboot set --stage-from, panio netboot tftp-root, docs/bisect.md, {SEE}",
                details="Runs on the host that owns the target. SOURCE must be a file whose real path\n"
                        "(symlinks followed) is inside the folder `netboot set --stage-from` allows; else\n"
                        "refused (13); no such folder configured: not_configured (3). NAME is a file name\n"
                        "or a relative path of them (pxelinux.cfg/default; each part not starting with\n"
                        "'.', no '..', at most 8 parts); its folders are made in the root, and one that\n"
                        "is a symlink or a file is refused (13). The file is copied to a temporary file\n"
                        "beside NAME and renamed over it (a symlink there is replaced, never followed).\n"
                        "Local files only: a URL is refused (2).")
    add_target_positional(c)
    c.add_argument("source", metavar="SOURCE", help="the file: an absolute path on the target's host (relative: "
                   "from here when the target is on this machine)")
    add_param(c, "netboot.stage", "name", metavar="NAME")
    add_json(c)


# -- plans (the bodies are in bench_agent.commands.netboot) -----------------------------------------


def _plan(args: argparse.Namespace, lab: Any, command: str, opts: dict[str, Any]) -> Step:
    netboot = dict(lab.channel(args.target, "netboot"))  # the host resolves the TFTP root (`~`, the default)
    return Step(command, args.target, {"target": args.target, "json": args.json, "netboot": netboot, **opts})


@runtime
def start(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "netboot.start", {})


@runtime
def stop(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "netboot.stop", spec_args(args, "netboot.stop"))


@runtime
def status(args: argparse.Namespace, lab: Any) -> Step:
    return _plan(args, lab, "netboot.status", spec_args(args, "netboot.status"))


@runtime
def stage(args: argparse.Namespace, lab: Any) -> Step:
    import os

    from bench_agent.errors import UsageError

    source = args.source
    if not os.path.isabs(source) and "://" not in source:
        if lab.target(args.target).get("host"):
            raise UsageError(f"netboot stage: {source!r} is relative, and {args.target!r} is on host "
                             f"{lab.target(args.target)['host']!r}: give the file's absolute path there",
                             argument="source")
        source = os.path.abspath(source)  # the target is on this machine: from the current directory
    return _plan(args, lab, "netboot.stage", {**spec_args(args, "netboot.stage"), "source": source})
