"""Operations on a target's dedicated link: netif.mode, netif.down_hard, netif.status.

Each takes the target's name and its ``netboot`` table (the link is the
netboot interface; the hard-down backend is configured there too).
"""

from __future__ import annotations

from typing import Any

from bench_agent.ops import operation
from bench_agent.ops.spec import Param

MODES = ("link", "ffx", "off")


@operation("netif.mode", side_effect=True, deadline=lambda args: 60.0,
           params=(Param("mode", str, "link: bare link up; ffx: netboot stopped, link up for IPv6 link-local; "
                         "off: administrative (soft) down", choices=MODES),))
def mode(target: str, netboot: dict[str, Any], mode: str) -> dict[str, Any]:
    """Set the link's mode (link, ffx, off); link and ffx undo a hard down first."""
    from bench_agent.netboot import netif

    return netif.set_mode(target, netboot, mode)


@operation("netif.down_hard", side_effect=True, deadline=lambda args: 45.0)
def down_hard(target: str, netboot: dict[str, Any]) -> dict[str, Any]:
    """Cut the link's adapter power so the target sees link loss (usb-sysfs, uhubctl or a hook)."""
    from bench_agent.netboot import netif

    return netif.down_hard(target, netboot)


@operation("netif.status", deadline=lambda args: 10.0,
           params=(Param("probe", bool, "ping all-nodes (ff02::1) on the link to find the target's fe80:: address",
                         default=True),))
def status(target: str, netboot: dict[str, Any], probe: bool = True) -> dict[str, Any]:
    """Mode, carrier, addresses and the target's IPv6 link-local, as a ready-to-paste `ffx target add`."""
    from bench_agent.netboot import netif

    return netif.status(target, netboot, probe)
