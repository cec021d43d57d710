"""The servers behind `netboot start`, one small interface and two implementations.

A ``NetbootServer`` is started once by the netboot daemon, asked ``alive()``
while it supervises, and ``stop()``-ed at the end. Both write what they did
to ``server.log`` in dnsmasq's words, so ``netboot status`` reads one format:

- ``DnsmasqServer`` (``dnsmasq.py``): Debian's dnsmasq as a child process,
  DHCP and TFTP on the target's interface only; needs root.
- ``PanioTftpServer`` (``panio.py``): panio's own TFTP server in the daemon's
  process; no DHCP, no root above port 1023.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from bench_agent.netboot.settings import Settings


class NetbootServer(Protocol):
    def start(self) -> None: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...


def make(s: Settings, folder: Path) -> NetbootServer:
    if s.server == "dnsmasq":
        from bench_agent.netboot.backends.dnsmasq import DnsmasqServer

        return DnsmasqServer(s, folder)
    from bench_agent.netboot.backends.panio import PanioTftpServer

    return PanioTftpServer(s, folder)
