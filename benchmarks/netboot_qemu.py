"""Netboot to a shell on the QEMU board: panio's TFTP server (through `panio netboot start`) beside QEMU's own
built-in TFTP server (`-netdev user,tftp=ROOT`), alternating in the same run. Goal: panio adds at most 10 %.

With ``--lockstep`` a third column: panio's TFTP server with ``--send-ahead 1`` (RFC 1350 lock-step,
as before the sliding window), run directly, to show what sending ahead buys in the same run.

Each boot: QEMU starts, its NIC's iPXE ROM takes the bootfile URL from QEMU's DHCP, fetches boot.ipxe, an
8 MB kernel and a busybox initramfs over TFTP, and the board's shell answers a command. Timed from QEMU's
start to that answer; the TFTP part alone (the guest's first read request to its last ACK) is read from
QEMU's packet dump of the NIC (``filter-dump``). Boots alternate, the first one rotating each round, and
the per-round ratios are printed beside the medians. The kernel is /boot/vmlinuz-* or Debian's, fetched once (tests/netboot_board.py).

Rows (issue 24): the TFTP part alone, panio / built-in, median of the per-round ratios, goal <= 1.2x at
any load; netboot to a shell, goal <= 1.1x.

dnsmasq's TFTP server cannot stand beside the built-in one here (QEMU answers TFTP to 10.0.2.2 port 69
itself, and dnsmasq serves on port 69 only): ``netboot_tap.py`` compares it with panio's on a tap link.

Run: .venv/bin/python benchmarks/netboot_qemu.py [--rounds 3] [--lockstep] [--json]
Needs: qemu-system-x86, ipxe-qemu, busybox-static. Starts and stops its own daemon and VMs.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import _bench  # noqa: E402  beside this script
import netboot_board  # noqa: E402  the QEMU netboot board, a test fixture

PANIO = str(Path(sys.executable).parent / "panio")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "panio-tests" / "kernel"


LABEL = {"panio": "panio", "qemu": "qemu tftp=", "lockstep": "panio lock-step"}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def boot_s(bootfile_url: str, netdev_extra: str = "", pcap: Path | None = None) -> tuple[float, float]:
    """Seconds to a shell answering, and seconds of TFTP (first request to last ACK, from QEMU's packet dump)."""
    dump = ("-object", f"filter-dump,id=f0,netdev=n0,file={pcap}") if pcap else ()
    board = netboot_board.Board(bootfile_url, netdev_extra, extra_args=dump)
    try:
        board.wait_for(netboot_board.BANNER, timeout_s=180)
        board.run("echo $((6*7)) answered", "42 answered")
        total = time.monotonic() - board.started
    finally:
        board.close()
    return total, tftp_span_s(pcap) if pcap else float("nan")


def tftp_span_s(pcap: Path) -> float:
    """From the guest's first TFTP read request to its last TFTP ACK, in a pcap of the guest's NIC."""
    data, off, first, last = pcap.read_bytes(), 24, None, None
    while off + 16 <= len(data):
        sec, usec, incl = struct.unpack_from("<III", data, off)
        frame, off = data[off + 16:off + 16 + incl], off + 16 + incl
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:  # IPv4, UDP
            continue
        ihl = (frame[14] & 0x0F) * 4
        opcode = frame[14 + ihl + 8:14 + ihl + 10]
        t = sec + usec / 1e6
        if opcode == b"\x00\x01" and first is None:
            first = t
        elif opcode == b"\x00\x04":
            last = t
    return (last - first) if first is not None and last is not None else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lockstep", action="store_true", help="also time panio's server in lock-step (--send-ahead 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object (the rows) instead of the table")
    a = p.parse_args()
    loads = [_bench.load()]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        port = free_udp_port()
        ours, builtin = tmp_path / "panio-root", tmp_path / "qemu-root"
        netboot_board.prepare(ours, f"tftp://10.0.2.2:{port}", CACHE)
        netboot_board.prepare(builtin, "tftp://10.0.2.2", CACHE)
        lock_port, lockstep = free_udp_port(), tmp_path / "lockstep-root"
        lock_server = None
        if a.lockstep:
            netboot_board.prepare(lockstep, f"tftp://10.0.2.2:{lock_port}", CACHE)
            lock_server = subprocess.Popen([sys.executable, "-m", "bench_agent.netboot.tftp", str(lockstep), "--port",
                                            str(lock_port), "--send-ahead", "1"], stdout=subprocess.DEVNULL)
        env = {**os.environ, "PANIO_LAB": str(tmp_path / "lab.toml"), "PANIO_STATE_DIR": str(tmp_path / "state")}

        def panio(*args: str) -> None:
            subprocess.run([PANIO, *args], env=env, check=True, capture_output=True)

        panio("init")
        panio("target", "add", "qemu")
        panio("netboot", "set", "-t", "qemu", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
              "--tftp-root", str(ours))
        panio("netboot", "start", "qemu")
        times: dict[str, list[float]] = {"panio": [], "qemu": [], "lockstep": []}
        tftp: dict[str, list[float]] = {"panio": [], "qemu": [], "lockstep": []}
        cases = [("panio", f"tftp://10.0.2.2:{port}/boot.ipxe", ""),
                 ("qemu", "tftp://10.0.2.2/boot.ipxe", f"tftp={builtin}")]
        cases += [("lockstep", f"tftp://10.0.2.2:{lock_port}/boot.ipxe", "")] if lock_server else []
        try:
            for i in range(a.rounds):
                # rotate who boots first, so a slow first (or last) boot of a round does not favour one server
                for name, url, extra in cases[i % len(cases):] + cases[:i % len(cases)]:
                    total, span = boot_s(url, extra, tmp_path / f"{name}-{i}.pcap")
                    times[name].append(total)
                    tftp[name].append(span)
                loads.append(_bench.load())
                print(f"round {i + 1}: " + ", ".join(f"{LABEL[n]} {times[n][-1]:.2f} s (TFTP {tftp[n][-1]:.2f} s)"
                                                     for n, _, _ in cases)
                      + f" (load {os.getloadavg()[0]:.2f})", flush=True, file=sys.stderr if a.json else sys.stdout)
        finally:
            panio("netboot", "stop", "qemu")
            if lock_server:
                lock_server.kill()
                lock_server.wait()
    # boots in one round run back to back, so their ratio cancels most of the machine's load drift
    load_range = [min(loads), max(loads)]
    tftp_pairs = {"floor": tftp["qemu"], "panio": tftp["panio"], "load": load_range,
                  "ratios": [o / t for o, t in zip(tftp["panio"], tftp["qemu"])]}
    boot_pairs = {"floor": times["qemu"], "panio": times["panio"], "load": load_range,
                  "ratios": [o / t for o, t in zip(times["panio"], times["qemu"])]}
    rows = [_bench.row("TFTP transfer (kernel + initrd), panio / QEMU's built-in", tftp_pairs, "<=", 1.2),
            _bench.row("netboot to a shell, panio / QEMU's built-in TFTP", boot_pairs, "<=", 1.1)]
    extra = {}
    if times["lockstep"]:
        extra["lockstep_over_builtin"] = [round(o / t, 3) for o, t in zip(times["lockstep"], times["qemu"])]
    _bench.emit(__file__, rows, a.json, extra)


if __name__ == "__main__":
    main()
