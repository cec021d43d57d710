"""A QEMU board that boots over the network: a real kernel, iPXE, a busybox initramfs.

The far end for proving ``netboot`` without hardware. ``prepare(root)`` fills a
TFTP root with what the board fetches:

    boot.ipxe     an iPXE script: kernel and initrd from the same TFTP server, then boot
    vmlinuz       this host's kernel (/boot/vmlinuz-*), else one fetched with apt-get download
    initrd.img    busybox-static and an /init that prints BANNER and runs a shell on ttyS0

``Board(url)`` starts QEMU with user networking, whose built-in DHCP hands the
NIC's iPXE ROM ``bootfile=URL``; ``tftp://10.0.2.2:PORT/...`` reaches the
host's loopback, where panio's TFTP server listens (no root needed). Settings
from /work/shared/QEMU-BOARD.md: TCG (KVM does not work here), IPv6 left on
(``ipv6=off`` makes iPXE wait ~13 s more), no ``restrict=on``.
"""

from __future__ import annotations

import glob
import gzip
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench_agent.errors import NotConfigured, Timeout
from bench_agent.sim.qemu import ipxe_script

BANNER = "panio-netboot-board: init reached"
PROMPT = "board# "
INIT = f"""#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
export PATH=/bin PS1='{PROMPT}'
echo "{BANNER}"
exec /bin/busybox setsid /bin/busybox cttyhack /bin/busybox sh
"""


# -- the initramfs: a newc cpio written here, so no cpio binary is needed ---------------------------


def _cpio_entry(name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0), ino: int = 1) -> bytes:
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
    head = b"070701" + b"".join(f"{f:08x}".encode() for f in fields) + name.encode() + b"\0"
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def initramfs(busybox: str) -> bytes:
    """A gzipped newc cpio with busybox, /init and a /dev/console node (the kernel opens it before /init)."""
    entries = [("dev", 0o40755), ("proc", 0o40755), ("sys", 0o40755), ("bin", 0o40755), ("tmp", 0o41777)]
    out = b"".join(_cpio_entry(n, m, ino=i + 1) for i, (n, m) in enumerate(entries))
    out += _cpio_entry("dev/console", 0o20600, rdev=(5, 1), ino=20)
    out += _cpio_entry("bin/busybox", 0o100755, Path(busybox).read_bytes(), ino=21)
    out += _cpio_entry("bin/sh", 0o120777, b"busybox", ino=22)
    out += _cpio_entry("init", 0o100755, INIT.encode(), ino=23)
    out += _cpio_entry("TRAILER!!!", 0, ino=0)
    return gzip.compress(out, compresslevel=6)


# -- a kernel ---------------------------------------------------------------------------------------


def find_kernel(cache: Path) -> Path:
    """This host's /boot/vmlinuz-*, else a Debian kernel image fetched once into ``cache``."""
    found = sorted(p for p in glob.glob("/boot/vmlinuz-*") if os.access(p, os.R_OK))
    if found:
        return Path(found[-1])
    cached = sorted(cache.glob("vmlinuz-*"))
    if cached:
        return cached[-1]
    return _download_kernel(cache)


def _download_kernel(cache: Path) -> Path:
    """`apt-get download` Debian's current kernel package and keep only its vmlinuz (it is not installed)."""
    if not shutil.which("apt-get"):
        raise NotConfigured("no kernel in /boot and no apt-get to fetch one")
    names = _kernel_packages()
    if not names and os.geteuid() == 0:  # a fresh CI machine may not have fetched package lists yet
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
        names = _kernel_packages()
    if not names:
        raise NotConfigured("apt-cache knows no linux-image-amd64 (run apt-get update)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        subprocess.run(["apt-get", "download", names[0]], cwd=work, check=True, capture_output=True, timeout=600)
        deb = next(Path(work).glob("*.deb"))
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", work, "--wildcards", "./boot/vmlinuz-*"], stdin=tar.stdout, check=True)
        tar.wait()
        kernel = next(Path(work, "boot").glob("vmlinuz-*"))
        final = cache / kernel.name
        shutil.move(str(kernel), final)
    return final


def _kernel_packages() -> list[str]:
    deps = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], capture_output=True, text=True).stdout
    return [w.split()[-1] for w in deps.splitlines() if "Depends: linux-image-" in w]


def prepare(root: Path, base_url: str, cache: Path) -> None:
    """Fill TFTP root ``root`` for a board that fetches from ``base_url`` (``tftp://10.0.2.2:PORT``)."""
    root.mkdir(parents=True, exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copyfile(find_kernel(cache), root / "vmlinuz")
    (root / "initrd.img").write_bytes(initramfs(busybox))
    (root / "boot.ipxe").write_text(ipxe_script(base_url))


# -- the board -------------------------------------------------------------------------------------


class Board:
    """QEMU booting from the network (``-boot n``), its serial console on stdin/stdout."""

    def __init__(self, bootfile_url: str, netdev_extra: str = "", memory_mb: int = 256,
                 extra_args: tuple[str, ...] = (), netdev: str = "") -> None:
        """``netdev`` replaces QEMU's user networking (``bootfile_url`` and ``netdev_extra`` then unused): a
        ``tap,id=n0,...`` link whose DHCP server names the boot file."""
        netdev = netdev or f"user,id=n0,bootfile={bootfile_url}" + (f",{netdev_extra}" if netdev_extra else "")
        argv = ["qemu-system-x86_64", "-M", "pc", "-accel", "tcg", "-m", str(memory_mb), "-smp", "1",
                "-display", "none", "-vga", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
                "-netdev", netdev, "-device", "e1000,netdev=n0", "-boot", "n", *extra_args]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.output = bytearray()
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := self.proc.stdout.read1(4096):
            with self._changed:
                self.output += chunk
                self._changed.notify_all()

    def text(self) -> str:
        return self.output.decode(errors="replace")

    def wait_for(self, text: str, timeout_s: float, after: int = 0) -> float:
        """Seconds since start when ``text`` appeared (in output past offset ``after``)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while text.encode() not in self.output[after:]:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise Timeout(f"board never printed {text!r} within {timeout_s:.0f} s; output ends: "
                                  f"{self.text()[-600:]!r}")
                self._changed.wait(min(left, 0.5))
        return time.monotonic() - self.started

    def run(self, command: str, expect: str, timeout_s: float = 30) -> None:
        mark = len(self.output)
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        self.wait_for(expect, timeout_s, after=mark)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
