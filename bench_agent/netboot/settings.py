"""A target's netboot settings: its netboot table from the lab file with panio's defaults filled in.

The channel (``channel.py``), the daemon and the servers (``backends/``) all read them; the servers
import this module, never the channel.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from bench_agent.errors import UsageError

SERVERS = ("dnsmasq", "panio")
DEFAULT_ADDRESS = "10.233.0.1/24"


def effective_root(target: str, netboot: dict[str, Any], tftp_root: str | None = None) -> str:
    """The TFTP root on this machine: ``tftp_root``, else the table's (``~`` expanded), else panio's state dir."""
    import os

    from bench_agent.paths import state_dir

    root = tftp_root or netboot.get("tftp_root")
    return os.path.expanduser(root) if root else str(state_dir() / "tftp" / target)


@dataclass(frozen=True)
class Settings:
    """A target's netboot table, with panio's defaults filled in."""

    target: str
    interface: str
    tftp_root: str
    server: str = "dnsmasq"
    address: str = DEFAULT_ADDRESS
    tftp_port: int = 69
    boot_file: str | None = None

    @classmethod
    def of(cls, target: str, netboot: dict[str, Any], tftp_root: str) -> Settings:
        server = netboot.get("server", "dnsmasq")
        if server not in SERVERS:
            raise UsageError(f"netboot server must be one of {', '.join(SERVERS)}, not {server!r}")
        address = netboot.get("address", DEFAULT_ADDRESS)
        try:
            iface = ipaddress.ip_interface(address)
        except ValueError:
            raise UsageError(f"netboot address {address!r} is not an IPv4 address with a prefix (10.233.0.1/24)",
                             target=target) from None
        if iface.version != 4 or iface.network.prefixlen > 30:
            raise UsageError(f"netboot address {address!r} must be IPv4 with room for clients (/30 or wider)")
        return cls(target, netboot["interface"], tftp_root, server, address, int(netboot.get("tftp_port", 69)),
                   netboot.get("boot_file"))

    @property
    def loopback(self) -> bool:
        return self.interface == "lo"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
