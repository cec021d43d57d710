"""TFTP to the QEMU board on a tap link, as a real board is wired: dnsmasq's C TFTP server (the `dnsmasq`
backend, its own configuration) beside panio's server (the `panio` backend), alternating in the same run.

Why a second netboot benchmark: QEMU's user networking answers every TFTP request to 10.0.2.2 port 69 itself
(libslirp's ``tftp_input``, "Access violation" when it has no ``tftp=`` root) and dnsmasq has no option to
serve TFTP on another port, so dnsmasq cannot be put beside QEMU's built-in server in
``netboot_qemu.py``. Here both run inside a private network namespace with a tap device (``10.233.0.1/24``),
dnsmasq hands the board its address and boot file over DHCP, and the same guest (iPXE, the same kernel and
initramfs) fetches them from one server or the other. The TFTP part (the guest's first read request to its
last ACK) is read from QEMU's packet dump of the NIC, as in ``netboot_qemu.py``.

Row: panio's TFTP / dnsmasq's TFTP, same tap, median of the per-round ratios (goal <= 1.2x: panio is no
slower than the C server on the same wire).

Run (root: a network namespace and a tap): .venv/bin/python benchmarks/netboot_tap.py [--rounds 3] [--json]
Needs: qemu-system-x86, ipxe-qemu, busybox-static, dnsmasq. Nothing listens outside its namespace.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import _bench  # noqa: E402  beside this script
import netboot_board  # noqa: E402  the QEMU netboot board, a test fixture
from netboot_qemu import CACHE, tftp_span_s  # noqa: E402

from bench_agent.netboot.backends.dnsmasq import DnsmasqServer  # noqa: E402
from bench_agent.netboot.backends.panio import PanioTftpServer  # noqa: E402
from bench_agent.netboot.settings import Settings  # noqa: E402

TAP, ADDRESS, SERVER_IP = "tap0", "10.233.0.1/24", "10.233.0.1"
LABEL = {"panio": "panio", "dnsmasq": "dnsmasq"}


class DhcpOnly(DnsmasqServer):
    """dnsmasq as the panio side's DHCP server alone: the backend's configuration without its TFTP lines,
    the boot file a URL to panio's server."""

    ready_text = "DHCP, IP range"

    def config(self) -> str:
        lines = [line for line in super().config().splitlines()
                 if not line.startswith(("enable-tftp", "tftp-root=", "dhcp-boot="))]
        return "\n".join([*lines, f"dhcp-boot=tftp://{SERVER_IP}/boot.ipxe"]) + "\n"


def boot_tftp_s(pcap: Path) -> tuple[float, float]:
    """Netboot the board on the tap; seconds to its shell's banner and seconds of TFTP."""
    board = netboot_board.Board("", netdev=f"tap,id=n0,ifname={TAP},script=no,downscript=no",
                                extra_args=("-object", f"filter-dump,id=f0,netdev=n0,file={pcap}"))
    try:
        board.wait_for(netboot_board.BANNER, timeout_s=240)
        total = time.monotonic() - board.started
    finally:
        board.close()
    return total, tftp_span_s(pcap)


def inside(rounds: int, as_json: bool) -> None:
    """In the namespace: the rounds, each booting once from each server, the first one alternating."""
    loads = [_bench.load()]
    tftp: dict[str, list[float]] = {"panio": [], "dnsmasq": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        root = tmp_path / "root"
        netboot_board.prepare(root, f"tftp://{SERVER_IP}", CACHE)
        settings = {
            "dnsmasq": Settings("tapboard", TAP, str(root), "dnsmasq", ADDRESS, boot_file="boot.ipxe"),
            "panio": Settings("tapboard", TAP, str(root), "panio", ADDRESS, tftp_port=69),
        }

        def serve(name: str, folder: Path) -> list:
            """The backend(s) serving one boot, started: the dnsmasq backend alone, or DHCP-only dnsmasq
            and the panio backend."""
            folder.mkdir()
            servers = ([DnsmasqServer(settings[name], folder)] if name == "dnsmasq" else
                       [DhcpOnly(settings["dnsmasq"], folder), PanioTftpServer(settings[name], folder)])
            for server in servers:
                server.start()
            return servers

        order = ["panio", "dnsmasq"]
        for i in range(rounds):
            for name in order[i % 2:] + order[:i % 2]:
                servers = serve(name, tmp_path / f"{name}-{i}")
                try:
                    _, span = boot_tftp_s(tmp_path / f"{name}-{i}.pcap")
                finally:
                    for server in servers:
                        server.stop()
                tftp[name].append(span)
            loads.append(_bench.load())
            print(f"round {i + 1}: " + ", ".join(f"{LABEL[n]} TFTP {tftp[n][-1]:.2f} s" for n in order)
                  + f" (load {os.getloadavg()[0]:.2f})", flush=True, file=sys.stderr if as_json else sys.stdout)
    pairs = {"floor": tftp["dnsmasq"], "panio": tftp["panio"], "load": [min(loads), max(loads)],
             "ratios": [p / d for p, d in zip(tftp["panio"], tftp["dnsmasq"])]}
    _bench.emit(__file__, [_bench.row("TFTP transfer (kernel + initrd), panio / dnsmasq, same tap", pairs, "<=", 1.2)],
                as_json)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print one JSON object (the row) instead of the table")
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.inside:
        inside(a.rounds, a.json)
        return
    if os.geteuid() != 0 or not shutil.which("dnsmasq", path="/usr/sbin:/sbin:" + os.environ.get("PATH", "")):
        # `make bench` runs every script: its summary then says "not measured", not "failed"
        print("netboot_tap: not measured: needs root (a network namespace, a tap) and dnsmasq")
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)",
          file=sys.stderr if a.json else sys.stdout, flush=True)
    ns = f"panio-tap-bench-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for cmd in (["link", "set", "lo", "up"], ["tuntap", "add", "dev", TAP, "mode", "tap"],
                    ["addr", "add", ADDRESS, "dev", TAP], ["link", "set", TAP, "up"]):
            subprocess.run(["ip", "-n", ns, *cmd], check=True)
        argv = [sys.executable, __file__, "--inside", "--rounds", str(a.rounds)] + (["--json"] if a.json else [])
        sys.exit(subprocess.run(["ip", "netns", "exec", ns, *argv]).returncode)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


if __name__ == "__main__":
    main()
