"""A target's netboot settings: its netboot table from the lab file with panio's defaults filled in.

The channel (``channel.py``), the daemon and the servers (``backends/``) all read them; the servers
import this module, never the channel. Every ``Settings`` is checked when it is made, on the host,
by the same rules as the lab file (``values.py``): a table that reached the host by another road
than a validated lab file is refused (13) before anything is written or served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench_agent.errors import Refused, UsageError
from bench_agent.netboot import values

SERVERS = ("dnsmasq", "panio")
DEFAULT_ADDRESS = "10.233.0.1/24"
TFTP_PORT = 69


def effective_root(target: str, netboot: dict[str, Any], tftp_root: str | None = None) -> str:
    """The TFTP root on this machine: ``tftp_root``, else the table's (``~`` expanded), else panio's state dir."""
    import os

    from bench_agent.paths import lab_state_dir as state_dir

    from bench_agent.netboot.values import home_form

    root = tftp_root or netboot.get("tftp_root")
    return os.path.expanduser(home_form(root)) if root else str(state_dir() / "tftp" / target)


@dataclass(frozen=True)
class Settings:
    """A target's netboot table, with panio's defaults filled in."""

    target: str
    interface: str
    tftp_root: str
    server: str = "dnsmasq"
    address: str = DEFAULT_ADDRESS
    tftp_port: int = TFTP_PORT
    boot_file: str | None = None

    def __post_init__(self) -> None:
        try:
            values.interface(self.interface)
            values.address(self.address)
            values.tftp_root(self.tftp_root)
            if self.boot_file is not None:
                values.boot_file(self.boot_file)
        except values.BadValue as exc:
            raise Refused(f"netboot of {self.target!r}: {exc}", hint="fix the target's netboot table in the lab "
                          "file (`panio netboot set`)", target=self.target) from None

    @classmethod
    def of(cls, target: str, netboot: dict[str, Any], tftp_root: str) -> Settings:
        server = netboot.get("server", "dnsmasq")
        if server not in SERVERS:
            raise UsageError(f"netboot server must be one of {', '.join(SERVERS)}, not {server!r}")
        return cls(target, netboot["interface"], tftp_root, server, netboot.get("address", DEFAULT_ADDRESS),
                   int(netboot.get("tftp_port", TFTP_PORT)), netboot.get("boot_file"))

    @property
    def loopback(self) -> bool:
        return self.interface == "lo"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
