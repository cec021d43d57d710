"""The QEMU board's boot image: a Debian kernel (never installed) and a busybox initramfs built here.

Kernel, first found: ``$PANIO_QEMU_KERNEL``; ``vmlinuz`` in a cache directory
(``$PANIO_QEMU_CACHE``, ``/var/cache/panio/qemu``, ``~/.cache/panio/qemu``),
where ``scripts/qemu-board-image.sh`` puts one (from ``/boot`` or extracted
from the Debian package); a readable ``/boot/vmlinuz-*``.

The initramfs is a gzipped newc cpio written by ``build_initramfs``: static
busybox, an ``/init`` that mounts proc, sysfs, devtmpfs and devpts (the kernel
does not mount devtmpfs itself), installs busybox's applets, loads the USB and
HID modules the ``usb-tablet`` pointer needs (when the kernel's modules are
found: ``modules/`` beside a cached kernel, else ``/lib/modules/VERSION``),
and runs busybox init with a shell on ttyS0 and one on tty1 (the VGA console,
which the keyboard types into). Boot prints the kernel's own banner (``/proc/version``)
on both, so the screen shows it whatever the log level.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
from pathlib import Path

from bench_agent.errors import NotConfigured

BUSYBOX = "/bin/busybox"
PROMPT = "qemu# "
INIT = """#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /var/log /var/run /sbin /usr/bin /usr/sbin /root
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
for m in usb-common usbcore uhci-hcd hid usbhid hid-generic evdev; do
  [ -f /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko
done
exec /bin/busybox init
"""
INITTAB = """::sysinit:/etc/rc
ttyS0::respawn:-/bin/sh
tty1::respawn:-/bin/sh
::ctrlaltdel:/sbin/reboot -f
"""
RC = """#!/bin/sh
hostname qemu
for t in /dev/tty1 /dev/ttyS0; do
  printf 'panio QEMU board\\n%s\\nType here: a shell on this console.\\n' "$(cat /proc/version)" > $t
done
"""
PROFILE = f"export PS1='{PROMPT}'\nexport HOME=/root\n"


def cache_dirs() -> list[Path]:
    dirs = [os.environ.get("PANIO_QEMU_CACHE"), "/var/cache/panio/qemu",
            str(Path.home() / ".cache" / "panio" / "qemu")]
    return [Path(d) for d in dirs if d]


def kernel() -> Path:
    explicit = os.environ.get("PANIO_QEMU_KERNEL")
    candidates = [Path(explicit)] if explicit else []
    candidates += [d / "vmlinuz" for d in cache_dirs()]
    candidates += [Path(p) for p in sorted(glob.glob("/boot/vmlinuz-*"), reverse=True)]
    for path in candidates:
        if path.is_file() and os.access(path, os.R_OK):
            return path
    raise NotConfigured("no kernel for the QEMU board", hint="run scripts/qemu-board-image.sh (it extracts one "
                        "from the Debian package into /var/cache/panio/qemu)")


MODULES = {  # module -> its path under kernel/ (loaded in this order by /init)
    "usb-common": "drivers/usb/common/usb-common.ko", "usbcore": "drivers/usb/core/usbcore.ko",
    "uhci-hcd": "drivers/usb/host/uhci-hcd.ko", "hid": "drivers/hid/hid.ko",
    "usbhid": "drivers/hid/usbhid/usbhid.ko", "hid-generic": "drivers/hid/hid-generic.ko",
    "evdev": "drivers/input/evdev.ko",
}


def modules(kernel_path: Path) -> dict[str, Path]:
    """The pointer's modules for this kernel: ``modules/`` beside a cached kernel, else /lib/modules/VERSION."""
    beside = kernel_path.parent / "modules"
    found = {m: beside / f"{m}.ko" for m in MODULES if (beside / f"{m}.ko").is_file()}
    if len(found) == len(MODULES):
        return found
    version = bzimage_version(kernel_path)
    tree = Path("/lib/modules") / version / "kernel"
    found = {m: tree / rel for m, rel in MODULES.items() if (tree / rel).is_file()}
    return found if len(found) == len(MODULES) else {}


def bzimage_version(path: Path) -> str:
    """The kernel release (``6.1.0-57-amd64``) from a bzImage's header (boot protocol: kernel_version at 0x20E)."""
    with open(path, "rb") as f:
        head = f.read(0x10000)
    offset = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    text = head[offset:offset + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    return text.split(" ", 1)[0] if head[0x202:0x206] == b"HdrS" and text else path.name.removeprefix("vmlinuz-")


def initramfs(directory: Path, kernel_path: Path) -> Path:
    """The initramfs, built into ``directory`` once (about 1-2 MB gzipped)."""
    out = directory / "initramfs.cpio.gz"
    if out.exists() and out.stat().st_mtime >= os.stat(BUSYBOX).st_mtime:
        return out
    if not os.path.isfile(BUSYBOX):
        raise NotConfigured("busybox is not installed", hint="install busybox-static (scripts/system-deps.sh does)")
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(build_initramfs(modules(kernel_path)))
    os.replace(tmp, out)
    return out


def build_initramfs(mods: dict[str, Path] | None = None) -> bytes:
    w = _Cpio()
    for d in ("bin", "dev", "etc", "etc/profile.d", "proc", "sys", "tmp", "root"):
        w.add(d, mode=0o040755)
    w.add("dev/console", mode=0o020600, rdev=(5, 1))
    w.add("bin/busybox", Path(BUSYBOX).read_bytes(), mode=0o100755)
    w.add("bin/sh", b"busybox", mode=0o120777)
    w.add("init", INIT.encode(), mode=0o100755)
    w.add("etc/inittab", INITTAB.encode(), mode=0o100644)
    w.add("etc/rc", RC.encode(), mode=0o100755)
    w.add("etc/profile", PROFILE.encode(), mode=0o100644)
    if mods:
        w.add("lib", mode=0o040755)
        w.add("lib/modules", mode=0o040755)
        for name, path in mods.items():
            w.add(f"lib/modules/{name}.ko", path.read_bytes(), mode=0o100644)
    return gzip.compress(w.finish(), compresslevel=6, mtime=0)


class _Cpio:
    """The newc format the kernel unpacks: a 110-byte ASCII header per entry, 4-byte alignment."""

    def __init__(self) -> None:
        self._out = io.BytesIO()
        self._ino = 1

    def add(self, name: str, data: bytes = b"", mode: int = 0o100644, rdev: tuple[int, int] = (0, 0)) -> None:
        fields = [self._ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
        self._ino += 1
        self._out.write(b"070701" + b"".join(b"%08X" % f for f in fields))
        self._out.write(name.encode() + b"\0")
        self._pad()
        self._out.write(data)
        self._pad()

    def _pad(self) -> None:
        self._out.write(b"\0" * (-self._out.tell() % 4))

    def finish(self) -> bytes:
        self.add("TRAILER!!!", mode=0)
        return self._out.getvalue()
