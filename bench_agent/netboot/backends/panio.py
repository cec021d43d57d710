"""PanioTftpServer: panio's own TFTP server (``bench_agent.netboot.tftp``) inside the netboot daemon.

No DHCP: the board's address and boot file come from elsewhere (QEMU's user
networking offers ``bootfile=tftp://10.0.2.2:PORT/...``; a lab DHCP server
points ``next-server`` here). It binds the target's own address, or 127.0.0.1
for the loopback interface, on ``tftp_port``.
"""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path

from bench_agent.errors import Busy, Refused
from bench_agent.netboot.settings import Settings
from bench_agent.netboot.values import BadValue
from bench_agent.netboot.tftp import TftpServer
from bench_agent.private import open_private


class PanioTftpServer:
    def __init__(self, s: Settings, folder: Path) -> None:
        self.s, self.folder = s, folder
        self.server: TftpServer | None = None
        self._log = os.fdopen(open_private(folder / "server.log", os.O_WRONLY | os.O_APPEND), "a", buffering=1)

    def _write(self, text: str) -> None:
        # dnsmasq's log line shape, so `netboot status` parses one format
        self._log.write(f"{time.strftime('%b %e %H:%M:%S')} panio-tftp[{os.getpid()}]: {text}\n")

    def start(self) -> None:
        host = "127.0.0.1" if self.s.loopback else str(ipaddress.ip_interface(self.s.address).ip)
        try:
            self.server = TftpServer(self.s.tftp_root, host, self.s.tftp_port, log=self._write).start()
        except BadValue as exc:
            raise Refused(f"netboot of {self.s.target!r}: {exc}", target=self.s.target) from None
        except PermissionError:
            raise Refused(f"TFTP port {self.s.tftp_port} needs root", hint="choose a port above 1023 with "
                          f"`panio netboot set -t {self.s.target} --tftp-port 6969`") from None
        except OSError as exc:
            raise Busy(f"cannot bind TFTP on {host}:{self.s.tftp_port}: {exc.strerror}",
                       hint="is another TFTP server running there?") from None
        self._write(f"TFTP root is {self.server.root}")

    def alive(self) -> bool:
        return self.server is not None and self.server.alive()

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self._log.close()
