"""panio's hidg reports through a real Linux USB gadget: f_hid on dummy_hcd, read back by usbhid.

This machine's own kernel has no gadget modules, but the QEMU board's Debian
kernel does. A tiny initramfs loads dummy_hcd, libcomposite and usb_f_hid,
creates the gadget with the configfs script of docs/hid.md exactly as
written (its report descriptors included), and the same kernel's usbhid binds
it as the USB host: ``/dev/hidraw*`` (a real hidraw reader) and evdev events.
The reports are the bytes ``panio hid send`` wrote (captured from its gadget
nodes first), each written to ``/dev/hidgN`` in one write(), as panio does.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from bench_agent.sim import qemu_image
from hidhelp import FhidHost

ROOT = Path(__file__).resolve().parent.parent
QEMU = "qemu-system-x86_64"
MODULES = {  # loaded in this order; paths under /lib/modules/VERSION/kernel
    "usb-common": "drivers/usb/common/usb-common.ko", "usbcore": "drivers/usb/core/usbcore.ko",
    "configfs": "fs/configfs/configfs.ko", "udc-core": "drivers/usb/gadget/udc/udc-core.ko",
    "dummy_hcd": "drivers/usb/gadget/udc/dummy_hcd.ko", "libcomposite": "drivers/usb/gadget/libcomposite.ko",
    "usb_f_hid": "drivers/usb/gadget/function/usb_f_hid.ko", "hid": "drivers/hid/hid.ko",
    "usbhid": "drivers/hid/usbhid/usbhid.ko", "hid-generic": "drivers/hid/hid-generic.ko",
    "evdev": "drivers/input/evdev.ko",
}
EV_KEY, EV_REL, EV_ABS = 1, 2, 3
KEY_LEFTCTRL, KEY_LEFTALT, KEY_DELETE, KEY_A, KEY_Z, KEY_LEFTSHIFT = 29, 56, 111, 30, 44, 42
BTN_RIGHT, REL_WHEEL, ABS_X, ABS_Y = 0x111, 8, 0, 1

INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
echo 0 > /proc/sys/kernel/ctrl-alt-del; trap '' INT  # the ctrl+alt+del report must not reboot this kernel
for m in MODULES; do insmod /lib/modules/$m.ko || echo "PANIO-INSMOD-FAILED $m"; done
mount -t configfs none /sys/kernel/config
sh -e /gadget.sh || echo PANIO-GADGET-FAILED
i=0; while [ ! -e /dev/hidraw1 ] || [ ! -e /dev/hidg1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
sleep 1
for d in /dev/hidraw0 /dev/hidraw1 /dev/input/event*; do cat $d > /tmp/$(basename $d) & done
sleep 1
n=0; while [ $n -lt KBD_REPORTS ]; do dd if=/reports/kbd.bin of=/dev/hidg0 bs=8 count=1 skip=$n 2>/dev/null; usleep 30000; n=$((n+1)); done
n=0; while [ $n -lt MOUSE_REPORTS ]; do dd if=/reports/mouse.bin of=/dev/hidg1 bs=6 count=1 skip=$n 2>/dev/null; usleep 30000; n=$((n+1)); done
sleep 1
for f in /tmp/*; do echo "PANIO-FILE $(basename $f) $(hexdump -v -e '1/1 "%02x"' $f)"; done
for e in /sys/class/input/event*; do echo "PANIO-NAME $(basename $e) $(cat $e/device/name)"; done
echo PANIO-DONE
poweroff -f
"""


def kernel_and_modules() -> tuple[Path, dict[str, Path]]:
    try:
        kernel = qemu_image.kernel()
    except Exception as exc:  # noqa: BLE001 - NotConfigured: no kernel here
        pytest.skip(f"no QEMU board kernel: {exc}")
    version = qemu_image.bzimage_version(kernel)
    found = {}
    for name, rel in MODULES.items():
        for cand in (kernel.parent / "modules" / f"{name}.ko", Path("/lib/modules") / version / "kernel" / rel):
            if cand.is_file():
                found[name] = cand
                break
        else:
            pytest.fail(f"module {name} for kernel {version} not found: scripts/qemu-board-image.sh caches it")
    return kernel, found


def gadget_script() -> str:
    """The configfs block of docs/hid.md, as a user would paste it (modprobe aside: /init loads the modules)."""
    docs = (ROOT / "docs" / "hid.md").read_text()
    block = re.search(r"```sh\n(modprobe libcomposite\n.*?)```", docs, re.S).group(1)
    return block.replace("modprobe libcomposite\n", "")


def panio_reports(panio, tmp_path) -> tuple[bytes, bytes]:
    """What `panio hid send` writes to the gadget's nodes for a fixed set of commands."""
    kbd, mouse = FhidHost(tmp_path / "hidg0", 8), FhidHost(tmp_path / "hidg1", 6)
    try:
        panio("init")
        panio("target", "add", "pc")
        panio("hid", "set", "-t", "pc", "--device", str(tmp_path / "hidg0"), "--protocol", "hidg")
        panio("hid", "send", "pc", "key", "ctrl+alt+del")
        panio("hid", "send", "pc", "type", "aZ")
        panio("hid", "send", "pc", "moveabs", "16384", "32767")
        panio("hid", "send", "pc", "click", "right")
        panio("hid", "send", "pc", "scroll", "-3")
        return b"".join(kbd.reports(6)), b"".join(mouse.reports(4))
    finally:
        kbd.close()
        mouse.close()


def events(hexdata: str) -> list[tuple[int, int, int]]:
    raw = bytes.fromhex(hexdata)
    out = []
    for i in range(0, len(raw) - len(raw) % 24, 24):  # struct input_event on x86-64: timeval, type, code, value
        etype, code, value = struct.unpack_from("<HHi", raw, i + 16)
        if etype in (EV_KEY, EV_REL, EV_ABS):
            out.append((etype, code, value))
    return out


@pytest.mark.skipif(shutil.which(QEMU) is None, reason="qemu-system-x86 missing (scripts/system-deps.sh installs it)")
def test_panio_reports_through_a_real_f_hid_gadget_reach_usbhid_as_meant(panio, tmp_path):
    kernel, mods = kernel_and_modules()
    kbd, mouse = panio_reports(panio, tmp_path)
    assert (len(kbd), len(mouse)) == (48, 24)
    init = (INIT.replace("MODULES", " ".join(MODULES)).replace("KBD_REPORTS", str(len(kbd) // 8))
            .replace("MOUSE_REPORTS", str(len(mouse) // 6)))
    w = qemu_image._Cpio()
    for d in ("bin", "dev", "proc", "sys", "tmp", "reports", "lib", "lib/modules"):
        w.add(d, mode=0o040755)
    w.add("dev/console", mode=0o020600, rdev=(5, 1))
    w.add("bin/busybox", Path(qemu_image.BUSYBOX).read_bytes(), mode=0o100755)
    w.add("init", init.encode(), mode=0o100755)
    w.add("gadget.sh", gadget_script().encode(), mode=0o100755)
    w.add("reports/kbd.bin", kbd)
    w.add("reports/mouse.bin", mouse)
    for name, path in mods.items():
        w.add(f"lib/modules/{name}.ko", path.read_bytes())
    initrd = tmp_path / "gadget.cpio"
    initrd.write_bytes(w.finish())
    proc = subprocess.run([QEMU, "-M", "pc", "-accel", "tcg", "-m", "256", "-smp", "1", "-nographic",
                           "-no-reboot", "-no-user-config", "-nodefaults", "-serial", "stdio", "-kernel", str(kernel),
                           "-initrd", str(initrd), "-append", "console=ttyS0 quiet panic=-1"],
                          capture_output=True, timeout=240, stdin=subprocess.DEVNULL, cwd="/")
    out = proc.stdout.decode("utf-8", "replace")
    assert "PANIO-DONE" in out, out[-3000:]
    assert "FAILED" not in out, out[-3000:]
    files = dict(re.findall(r"PANIO-FILE (\S+) ([0-9a-f]*)", out))
    # the real hidraw reader: the host received panio's reports byte for byte
    assert {files["hidraw0"], files["hidraw1"]} == {kbd.hex(), mouse.hex()}, out[-2000:]
    evs = [e for name, data in files.items() if name.startswith("event") for e in events(data)]
    # value 2 is the guest's own autorepeat (a TCG guest slowed by a loaded host sees a key held past its
    # repeat delay): the input layer's timing, not a report panio sent
    keys = [(c, v) for t, c, v in evs if t == EV_KEY and c < 0x100 and v != 2]
    assert keys == [(KEY_LEFTCTRL, 1), (KEY_LEFTALT, 1), (KEY_DELETE, 1),
                    (KEY_LEFTCTRL, 0), (KEY_LEFTALT, 0), (KEY_DELETE, 0),
                    (KEY_A, 1), (KEY_A, 0), (KEY_LEFTSHIFT, 1), (KEY_Z, 1), (KEY_LEFTSHIFT, 0), (KEY_Z, 0)], evs
    mouse_evs = [(t, c, v) for t, c, v in evs if t in (EV_ABS, EV_REL) or (t == EV_KEY and c >= 0x100)]
    # the click's and the wheel's null X/Y (0xFFFF) move nothing: only moveabs sets a position
    assert [(c, v) for t, c, v in mouse_evs if t == EV_ABS] == [(ABS_X, 16384), (ABS_Y, 32767)], mouse_evs
    assert [(c, v) for t, c, v in mouse_evs if t == EV_KEY] == [(BTN_RIGHT, 1), (BTN_RIGHT, 0)]
    assert (EV_REL, REL_WHEEL, -3) in mouse_evs
