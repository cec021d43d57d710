"""DnsmasqServer: Debian's dnsmasq, DHCP and TFTP on one interface, as the netboot daemon's child.

panio writes the whole configuration (``-C`` replaces /etc/dnsmasq.conf, so a
host's own dnsmasq setup never leaks in): DNS off, bound to the target's
interface alone, no router or DNS server offered (the target must not route
through the bench), a lease range inside panio's subnet, TFTP from the
target's root. Raspberry Pi firmware only netboots when the DHCP reply carries
option 43 "Raspberry Pi Boot", which ``pxe-service=0,"Raspberry Pi Boot"``
produces; a target with a ``boot_file`` (PC-style PXE, iPXE, U-Boot) gets
``dhcp-boot`` instead, since that PXE menu would send an x86 PXE ROM to its
local disk.

Each value is checked again just before the file is written (``values.py``, the rules of the lab file):
dnsmasq runs as root, and a newline in a value would be a directive of its own. The TFTP root is
written as the real folder, symlinks resolved, so a link changed after the check serves nothing new.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from bench_agent.errors import DeviceError, NotConfigured, Refused
from bench_agent.netboot import values
from bench_agent.netboot.settings import Settings
from bench_agent.private import open_private, write_private

READY_TEXT = "TFTP root is"
START_WAIT_S = 10.0


def config_text(s: Settings, folder: Path) -> str:
    """dnsmasq.conf for ``s``; ``values.BadValue`` for a value that must not reach it."""
    values.interface(s.interface)
    values.address(s.address)
    if s.boot_file:
        values.boot_file(s.boot_file)
    root = values.served_root(s.tftp_root)
    net = ipaddress.ip_interface(s.address).network
    first, last = net.network_address + 2, net.broadcast_address - 1
    lines = [
        f"# written by panio for target {s.target} at each `panio netboot start`; edits are overwritten",
        "port=0", f"interface={s.interface}", "bind-interfaces",
        f"dhcp-range={first},{last},{net.netmask},1h", f"dhcp-leasefile={folder / 'leases'}",
        "dhcp-option=option:router", "dhcp-option=option:dns-server", "no-ping", "log-dhcp",
        f"log-facility={folder / 'server.log'}", "enable-tftp", f"tftp-root={root}",
        f"user={pwd.getpwuid(os.getuid()).pw_name}",
    ]
    lines.append(f"dhcp-boot={s.boot_file}" if s.boot_file else 'pxe-service=0,"Raspberry Pi Boot"')
    return "\n".join(lines) + "\n"


def reap_orphan(folder: Path) -> int | None:
    """Stop a dnsmasq left running on this target's config by a supervisor that was killed (kill -9).

    A parent-death signal does not survive dnsmasq's own privilege handling
    (measured), so the pid file written at each start is what finds an orphan.
    """
    from bench_agent.process import pid_alive
    from bench_agent.serial.client import terminate
    from bench_agent.serial.device import command_line

    try:
        pid = int((folder / "dnsmasq.pid").read_text())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid) or str(folder / "dnsmasq.conf") not in command_line(pid):
        return None
    terminate(pid, "an orphaned dnsmasq", "dnsmasq", force=True)
    return pid


class DnsmasqServer:
    ready_text = READY_TEXT  # the log line that says dnsmasq is serving

    def __init__(self, s: Settings, folder: Path) -> None:
        self.s, self.folder = s, folder
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        exe = shutil.which("dnsmasq") or shutil.which("dnsmasq", path="/usr/sbin:/sbin")
        if exe is None:
            raise NotConfigured("dnsmasq is not installed on this host", hint="apt-get install dnsmasq-base, "
                                "or `panio netboot set --server panio` for TFTP only")
        if os.geteuid() != 0:
            raise Refused("dnsmasq needs root here (DHCP port 67, raw packets)",
                          hint="run the bench agent as root, or `panio netboot set --server panio` for TFTP only")
        conf = self.folder / "dnsmasq.conf"
        try:
            text = self.config()
        except values.BadValue as exc:
            raise Refused(f"netboot of {self.s.target!r}: not writing dnsmasq.conf: {exc}", target=self.s.target) from None
        write_private(conf, text.encode())  # the lab's values: this user's alone (bench_agent.private)
        log = self.folder / "server.log"
        offset = log.stat().st_size if log.exists() else 0
        reap_orphan(self.folder)
        with os.fdopen(open_private(self.folder / "dnsmasq.err", os.O_WRONLY | os.O_TRUNC), "wb") as err:
            self.proc = subprocess.Popen([exe, "-C", str(conf), "--keep-in-foreground", "--pid-file="],
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd="/")
        write_private(self.folder / "dnsmasq.pid", f"{self.proc.pid}\n".encode())
        self._wait_ready(log, offset)

    def config(self) -> str:
        return config_text(self.s, self.folder)

    def _wait_ready(self, log: Path, offset: int) -> None:
        deadline = time.monotonic() + START_WAIT_S
        mark = f"[{self.proc.pid}]: {self.ready_text}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                why = (self.folder / "dnsmasq.err").read_text(errors="replace").strip() or "no message"
                raise DeviceError(f"dnsmasq exited ({self.proc.returncode}) on {self.s.interface}: {why}",
                                  interface=self.s.interface)
            if log.exists():
                with open(log, errors="replace") as f:
                    f.seek(offset)
                    if mark in f.read():
                        return
            time.sleep(0.05)
        self.stop()
        raise DeviceError(f"dnsmasq did not report ready within {START_WAIT_S:.0f} s; see {log}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
