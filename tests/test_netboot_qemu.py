"""A QEMU board netboots through `panio netboot start`: iPXE fetches its kernel and initramfs from
panio's own TFTP server over QEMU's user networking, and the board reaches a shell.

The kernel is this host's /boot/vmlinuz-*, or on a fresh CI machine Debian's
current kernel image fetched once with `apt-get download` into the cache
(netboot_board.find_kernel); the initramfs is busybox-static.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

import netboot_board

pytestmark = pytest.mark.skipif(not shutil.which("qemu-system-x86_64") or not shutil.which("busybox"),
                                reason="needs qemu-system-x86 and busybox-static (scripts/system-deps.sh installs them)")

KERNEL_CACHE = Path(os.environ["PANIO_TEST_CACHE"]) / "kernel"  # kept between runs (tests/sessionhome.py)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_qemu_board_netboots_from_panio_tftp_to_a_shell(panio, tmp_path: Path) -> None:
    port = free_udp_port()
    root = tmp_path / "tftp"
    netboot_board.prepare(root, f"tftp://10.0.2.2:{port}", KERNEL_CACHE)
    panio("init")
    panio("target", "add", "qemu")
    panio("netboot", "set", "-t", "qemu", "--interface", "lo", "--server", "panio", "--tftp-port", str(port),
          "--tftp-root", str(root))
    started = panio("netboot", "start", "qemu", "--json").json()
    assert started["server"] == "panio" and started["tftp_port"] == port
    board = netboot_board.Board(f"tftp://10.0.2.2:{port}/boot.ipxe")
    try:
        board.wait_for(netboot_board.BANNER, timeout_s=150)
        board.run("echo $((6*7)) answered", "42 answered")
    finally:
        board.close()
    st = panio("netboot", "status", "qemu", "--json").json()
    assert st["serving"] and st["server"] == "panio"
    sent = [Path(f["file"]).name for f in st["files"] if f["result"] == "sent"]
    assert sent == ["boot.ipxe", "vmlinuz", "initrd.img"]
    assert "sent" in panio("netboot", "status", "qemu").out
    assert panio("netboot", "stop", "qemu", "--json").json()["was_running"]
    assert not panio("netboot", "status", "qemu", "--json").json()["serving"]
