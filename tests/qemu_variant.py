"""A QEMU board of another design than panio's own: the far end for "a board panio has never seen" (issue 23).

panio's own QEMU board (``panio-sim up --qemu``) opens a QMP socket per role and greets with its name and
``qemu# ``. This one is built the way an outside lab would build it:

    one QMP socket      ``DIR/board.qmp``: video (screendump), keyboard/mouse and power share it
    another prompt      ``PROMPT`` (``acme:/# ``), set by its own /etc/profile
    another screen      ``SCREEN_BANNER`` on the VGA console, no kernel banner, no setup menu
    its own power hook  ``DIR/qmp-hook.py SOCKET COMMAND``: a plain-socket QMP client, not panio's

It reuses panio's kernel and initramfs (no extra boot cost) and lays a second cpio over it: the kernel
unpacks concatenated archives in order, so this one's ``/etc/inittab``, ``/etc/rc`` and ``/etc/profile``
replace the base image's. ``VariantBoard(dir)`` starts it (paused, so the serial PTY is linked before the
first byte), ``lab(name)`` is its lab-file table, ``close()`` stops it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench_agent.sim import qemu_image
from bench_agent.sim.qemu import APPEND

QEMU = "qemu-system-x86_64"
PROMPT = "acme:/# "
SCREEN_BANNER = "ACME RUGGED-7 FIELD UNIT"
INITTAB = """::sysinit:/etc/rc
ttyS0::respawn:-/bin/sh
tty1::respawn:-/bin/sh
"""
RC = f"""#!/bin/sh
hostname acme
printf '\\033[2J\\033[H{SCREEN_BANNER}\\nconsole ready\\n' > /dev/tty1
echo '{SCREEN_BANNER}: serial console ready' > /dev/ttyS0
"""
PROFILE = f"export PS1='{PROMPT}'\nexport HOME=/\n"
# A lab's own power hook: plain sockets, one QMP command, no panio code (what an operator writes).
HOOK = """import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(float(sys.argv[3]) if len(sys.argv) > 3 else 30)
s.connect(sys.argv[1])
f = s.makefile("rb")
f.readline()
for cmd in ("qmp_capabilities", sys.argv[2]):
    s.sendall(json.dumps({"execute": cmd}).encode() + b"\\n")
    while "event" in (reply := json.loads(f.readline())):
        pass
    if "error" in reply:
        sys.exit(reply["error"]["desc"])
print(sys.argv[2], "done")
"""


def missing() -> str | None:
    """Why this board cannot run here, or None."""
    if shutil.which(QEMU) is None:
        return "qemu-system-x86 is not installed (scripts/system-deps.sh installs it)"
    if not os.path.isfile(qemu_image.BUSYBOX):
        return "busybox-static is not installed (scripts/system-deps.sh installs it)"
    try:
        qemu_image.kernel()
    except Exception as exc:  # noqa: BLE001 - NotConfigured: no kernel here
        return f"no kernel for the QEMU board: {exc}"
    return None


def overlay() -> bytes:
    """The second cpio (gzipped): this board's inittab, rc and profile."""
    w = qemu_image._Cpio()
    w.add("etc/inittab", INITTAB.encode(), mode=0o100644)
    w.add("etc/rc", RC.encode(), mode=0o100755)
    w.add("etc/profile", PROFILE.encode(), mode=0o100644)
    return gzip.compress(w.finish(), compresslevel=6, mtime=0)


def qmp_call(path: str, command: str, timeout_s: float = 10, **arguments) -> object:
    """One QMP command over a fresh connection (the test's own, not panio's client)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        f = s.makefile("rb")
        f.readline()
        for cmd, args in (("qmp_capabilities", {}), (command, arguments)):
            s.sendall(json.dumps({"execute": cmd, **({"arguments": args} if args else {})}).encode() + b"\n")
            while "event" in (reply := json.loads(f.readline())):
                pass
        f.close()
        return reply.get("return", reply.get("error"))


class VariantBoard:
    def __init__(self, directory: Path, name: str = "acme") -> None:
        self.dir, self.name = directory, name
        directory.mkdir(parents=True, exist_ok=True)
        self.qmp = directory / "board.qmp"
        self.tty = directory / "board.tty"
        self.hook = directory / "qmp-hook.py"
        self.hook.write_text(HOOK)
        kernel = qemu_image.kernel()
        initrd = directory / "initrd.img"
        initrd.write_bytes(qemu_image.initramfs(directory, kernel).read_bytes() + overlay())
        argv = [QEMU, "-M", "pc", "-accel", "tcg", "-m", "256", "-smp", "1", "-display", "none", "-S",
                "-no-user-config", "-nodefaults", "-device", "VGA", "-serial", "pty", "-usb", "-device", "usb-tablet",
                "-qmp", f"unix:{self.qmp},server=on,wait=off", "-name", f"acme-{name}",
                "-kernel", str(kernel), "-initrd", str(initrd), "-append", APPEND]
        self.log = open(directory / "qemu.log", "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True, cwd="/")
        try:
            self._link_pty_and_run()
        except BaseException:
            self.close()
            raise

    def _link_pty_and_run(self) -> None:
        end = time.monotonic() + 60
        while True:  # the socket file appears at bind(), a moment before QEMU listens on it (refused till then)
            assert self.proc.poll() is None and time.monotonic() < end, (self.dir / "qemu.log").read_text()
            try:
                chardevs = qmp_call(str(self.qmp), "query-chardev")
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.05)
        pty = next(c["filename"].removeprefix("pty:") for c in chardevs if c["filename"].startswith("pty:"))
        os.symlink(pty, self.tty)
        qmp_call(str(self.qmp), "cont")

    def hook_cmd(self, command: str) -> str:
        return f"{sys.executable} -P {self.hook} {self.qmp} {command}"

    def lab(self) -> dict:
        """This board's lab-file target table: every role on the one QMP socket."""
        return {"description": "ACME RUGGED-7 (QEMU, one QMP socket)", "tags": ["acme"],
                "serial": [{"name": "console", "device": str(self.tty), "baud": 115200}],
                "video": {"device": f"qmp:{self.qmp}"}, "hid": {"device": str(self.qmp), "protocol": "qmp"},
                "power": {"cycle_cmd": self.hook_cmd("system_reset"), "timeout_s": 20}}

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.log.close()
