"""Hardware tier, R1 for real: the QEMU board netboots through panio (one QEMU boot in this module).

`panio-sim up --boards 0 --qemu --qemu-netboot` gives a QEMU board with no ``-kernel``: its NIC's iPXE
ROM takes ``bootfile=tftp://10.0.2.2:PORT/boot.ipxe`` from QEMU's user networking and fetches the
kernel and initramfs from panio's own TFTP server (``panio netboot start`` on loopback). R1's job
captures the console, starts the server, power-cycles, waits for the kernel's banner and the shell,
reads the last 50 lines and checks ``netboot status`` says the files were sent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from scenarios import hardware
from scenarios.drift import Guard
from scenarios.scenario import load_all
from serial_fixtures import processes

pytestmark = pytest.mark.skipif(not shutil.which("qemu-system-x86_64") or not os.path.exists("/bin/busybox"),
                                reason="needs qemu-system-x86, ipxe-qemu and busybox-static (scripts/system-deps.sh)")


def _qemu_of(directory: Path) -> list[int]:
    """QEMU processes whose command line names ``directory`` (the simulated bench's own sockets)."""
    return [pid for pid, argv in processes() if b"qemu-system" in argv and str(directory).encode() in argv]


def test_r1_netboots_the_qemu_board_from_panios_tftp_server_to_a_shell(tmp_path: Path) -> None:
    from bench_agent.daemons.registry import _daemon_processes

    if hardware.missing(Guard(), real_bench=False):
        pytest.skip("pending here: job run or panio-sim missing")
    sc = next(s for s in load_all() if s.id == "R1")
    run_dir = tmp_path / "run"
    try:
        result = hardware.run(sc, run_dir, Guard())
        assert result.status == "pass", result
        # the TFTP root the board booted from is the simulated bench's, served by panio (not QEMU's tftp=)
        [log] = [p.read_text() for p in (run_dir / "state").glob("labs/*/netboot/qemu0/server.log")]  # the lab's
        assert "panio-tftp" in log and "sent" in log and "vmlinuz" in log and "initrd.img" in log
        # nothing outlives the run: no QEMU, no capture or netboot daemon
        assert _qemu_of(run_dir) == [] and _daemon_processes(run_dir / "state", every_lab=True) == {}
    finally:
        for pid in _qemu_of(run_dir) + list(_daemon_processes(run_dir / "state", every_lab=True)):
            os.kill(pid, 9)
