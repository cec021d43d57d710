"""Netboot to a shell on the QEMU board: panio's TFTP server (through `panio netboot start`) beside QEMU's own
built-in TFTP server (`-netdev user,tftp=ROOT`), alternating in the same run. Goal: panio adds at most 10 %.

With ``--lockstep`` a third column: panio's TFTP server with ``--send-ahead 1`` (RFC 1350 lock-step,
as before the sliding window), run directly, to show what sending ahead buys in the same run.

Each boot: QEMU starts, its NIC's iPXE ROM takes the bootfile URL from QEMU's DHCP, fetches boot.ipxe, an
8 MB kernel and a busybox initramfs over TFTP, and the board's shell answers a command. Timed from QEMU's
start to that answer. The kernel is /boot/vmlinuz-* or Debian's, fetched once (bench_agent.netboot_board).

Run: .venv/bin/python benchmarks/netboot_qemu.py [--rounds 3] [--lockstep]
Needs: qemu-system-x86, ipxe-qemu, busybox-static. Starts and stops its own daemon and VMs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_agent import netboot_board

PANIO = str(Path(sys.executable).parent / "panio")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "panio-tests" / "kernel"


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def boot_s(bootfile_url: str, netdev_extra: str = "") -> float:
    board = netboot_board.Board(bootfile_url, netdev_extra)
    try:
        board.wait_for(netboot_board.BANNER, timeout_s=180)
        board.run("echo $((6*7)) answered", "42 answered")
        return time.monotonic() - board.started
    finally:
        board.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lockstep", action="store_true", help="also time panio's server in lock-step (--send-ahead 1)")
    a = p.parse_args()
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
            lock_server = subprocess.Popen([sys.executable, "-m", "bench_agent.tftp", str(lockstep), "--port",
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
        try:
            for i in range(a.rounds):
                times["panio"].append(boot_s(f"tftp://10.0.2.2:{port}/boot.ipxe"))
                times["qemu"].append(boot_s("tftp://10.0.2.2/boot.ipxe", f"tftp={builtin}"))
                if lock_server:
                    times["lockstep"].append(boot_s(f"tftp://10.0.2.2:{lock_port}/boot.ipxe"))
                print(f"round {i + 1}: panio {times['panio'][-1]:.2f} s, qemu tftp= {times['qemu'][-1]:.2f} s"
                      + (f", panio lock-step {times['lockstep'][-1]:.2f} s" if lock_server else "")
                      + f" (load {os.getloadavg()[0]:.2f})", flush=True)
        finally:
            panio("netboot", "stop", "qemu")
            if lock_server:
                lock_server.kill()
                lock_server.wait()
    # boots in one round run back to back, so their ratio cancels most of the machine's load drift
    paired = [o / t for o, t in zip(times["panio"], times["qemu"])]
    print(f"\nper-round ratio panio / QEMU: {', '.join(f'{r:.3f}' for r in paired)}; "
          f"median {statistics.median(paired):.3f}")
    if times["lockstep"]:
        lock = [o / t for o, t in zip(times["lockstep"], times["qemu"])]
        print(f"per-round ratio lock-step / QEMU: {', '.join(f'{r:.3f}' for r in lock)}; "
              f"median {statistics.median(lock):.3f}")
    ours_s, theirs_s = statistics.median(times["panio"]), statistics.median(times["qemu"])
    print(f"\nnetboot to a shell, median of {a.rounds}:")
    print(f"  QEMU built-in TFTP   {theirs_s:6.2f} s")
    print(f"  panio TFTP server    {ours_s:6.2f} s   ratio {ours_s / theirs_s:.3f} "
          f"({'within' if ours_s <= theirs_s * 1.10 else 'OVER'} the 10 % goal)")
    if times["lockstep"]:
        lock_s = statistics.median(times["lockstep"])
        print(f"  panio lock-step      {lock_s:6.2f} s   ratio {lock_s / theirs_s:.3f}")


if __name__ == "__main__":
    main()
