"""Netboot operations: serve DHCP and TFTP for a target on its dedicated link (netboot.start/stop/status), and
put a file into its TFTP root (netboot.stage).

Each takes the target's name and its ``netboot`` table from the lab file (plain
data); the TFTP root is resolved on the host that owns the target, where the
server runs in a daemon (``bench_agent.netboot.channel``).
"""

from __future__ import annotations

from typing import Any

from bench_agent.ops import operation
from bench_agent.ops.spec import Param

START_DEADLINE_S = 45.0  # the daemon's own start-up bound (30 s, dnsmasq's 10 s inside it) and a margin


def _settings(target: str, netboot: dict[str, Any], tftp_root: str | None):
    """The target's settings; the TFTP root is resolved here, on the host that serves it (``~``, the default)."""
    from bench_agent.netboot.settings import Settings, effective_root

    return Settings.of(target, netboot, effective_root(target, netboot, tftp_root))


@operation("netboot.start", side_effect=True, deadline=lambda args: START_DEADLINE_S)
def start(target: str, netboot: dict[str, Any], tftp_root: str | None = None) -> dict[str, Any]:
    """Serve DHCP+TFTP (or TFTP only) for the target on its dedicated interface; refuses a primary NIC."""
    from bench_agent.errors import NotConfigured
    from bench_agent.netboot import channel as nb
    from bench_agent.netboot import netif

    try:
        info = nb.start(_settings(target, netboot, tftp_root))
    except NotConfigured as exc:  # its interface is gone: say so when `netif down-hard` powered it off
        if "interface" in exc.details and netif.recorded(target).get("mode") == "down-hard":
            exc.hint = f"its adapter is powered off: `panio netif mode link {target}` powers it back"
        raise
    netif.record(target, "netboot")
    return info


@operation("netboot.stop", side_effect=True, deadline=lambda args: 20.0,
           params=(Param("force", bool, "SIGKILL a server that does not stop within 10 s", default=False),))
def stop(target: str, force: bool = False) -> dict[str, Any]:
    """Stop the target's netboot server (not running is reported, not an error)."""
    from bench_agent.netboot import channel as nb

    return nb.stop(target, force)


@operation("netboot.status", deadline=lambda args: 10.0,
           params=(Param("tail", int, "how many recent leases and files to show", default=10, minimum=1,
                         maximum=1000),))
def status(target: str, netboot: dict[str, Any], tftp_root: str | None = None, tail: int = 10) -> dict[str, Any]:
    """Serving or not, interface, TFTP root, the last DHCP leases and files served."""
    from bench_agent.netboot import channel as nb

    return nb.status(_settings(target, netboot, tftp_root), tail)


STAGE_DEADLINE_S = 300.0  # copying a few GB of root file system on a slow disk


@operation("netboot.stage", side_effect=True, destructive=False, deadline=lambda args: STAGE_DEADLINE_S,
           params=(Param("source", str, "the file to serve: an absolute path on the target's host, inside the "
                         "netboot table's stage_from folder (symlinks followed); no URLs"),
                   Param("name", str, "the file's name in the TFTP root, or a relative path (pxelinux.cfg/default: its "
                         "folders are made) (default: SOURCE's file name)", default=None,
                         flag="--as")))
def stage(target: str, netboot: dict[str, Any], source: str, name: str | None = None,
          tftp_root: str | None = None) -> dict[str, Any]:
    """Copy SOURCE into the target's TFTP root as NAME (a temporary file renamed over it): what was staged."""
    from bench_agent.netboot.settings import effective_root
    from bench_agent.netboot.stage import stage as stage_file

    return stage_file(target, netboot, effective_root(target, netboot, tftp_root), source, name)
