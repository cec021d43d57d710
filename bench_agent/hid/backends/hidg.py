"""A Linux USB HID gadget (``/dev/hidgN``, the kernel's f_hid): a boot keyboard and an absolute mouse.

The control host is the USB *device* here (a Raspberry Pi or any board with a
USB device controller, cabled to the target's USB port), set up through
configfs with two HID functions (docs/hid.md has the script): the keyboard
on ``/dev/hidgN`` and the mouse on ``/dev/hidg(N+1)``. f_hid sends each
``write()`` to the USB host as one interrupt-IN report, so every report is one
write of exactly the function's ``report_length`` bytes:

    keyboard (8 bytes, the boot protocol)   modifiers, 0, key1..key6
    mouse (6 bytes)                          buttons, X (LE u16), Y (LE u16), wheel (s8)

X and Y are panio's 0..32767 logical space as it is (no scaling). They are
declared with the HID *Null State* flag, so ``NULL_XY`` (0xFFFF, outside
0..32767) means "no position": a click or a wheel notch is a report with null
X/Y and lands where the pointer is (Linux ``hidinput_hid_event`` drops
out-of-range values of null-state fields; Windows and macOS follow the HID
spec the same way).

A write waits for the previous report to be taken (f_hid allows one in
flight): the fd is non-blocking and polled, so a host that is not reading
(cable unplugged, target off) is a ``Timeout``, never a hang.
"""

from __future__ import annotations

import errno
import os
import re
import select
import struct

from bench_agent.errors import Timeout, Unreachable
from bench_agent.hid.base import HidBackend

KEYBOARD_REPORT_LEN = 8
MOUSE_REPORT_LEN = 6
NULL_XY = 0xFFFF
WRITE_TIMEOUT_S = 1.0

# The boot keyboard of the kernel's Documentation/usb/gadget_hid.rst (63 bytes): configfs
# functions/hid.keyboard: protocol 1, subclass 1, report_length 8.
KEYBOARD_DESCRIPTOR = bytes.fromhex(
    "05010906a101050719e029e7150025017501950881029501750881039505750105081901290591029501"
    "7503910395067508150025650507190029658100c0")
# An absolute mouse (63 bytes): configfs functions/hid.mouse: protocol 0, subclass 0, report_length 6.
MOUSE_DESCRIPTOR = bytes.fromhex(
    "05010902a1010901a100"              # Generic Desktop / Mouse / Pointer
    "050919012903150025019503750181029501750581" "03"  # 3 buttons + 5 bits padding
    "0501093009311500" "26ff7f" "751095028142"         # X, Y: 0..32767, 16 bits, Data,Var,Abs,Null
    "0938158125" "7f" "750895018106"                   # wheel: -127..127, relative
    "c0c0")


def mouse_device(keyboard: str) -> str:
    """The mouse gadget beside ``keyboard``: ``/dev/hidg0`` -> ``/dev/hidg1``."""
    m = re.search(r"(\d+)$", keyboard)
    if not m:
        raise Unreachable(f"HID gadget {keyboard!r} does not end in a number (/dev/hidgN)", device=keyboard)
    return keyboard[:m.start()] + str(int(m.group(1)) + 1)


def keyboard_report(modifiers: int, usages: list[int]) -> bytes:
    return bytes([modifiers, 0, *(list(usages) + [0] * 6)[:6]])


def mouse_report(buttons: int, x: int = NULL_XY, y: int = NULL_XY, wheel: int = 0) -> bytes:
    return struct.pack("<BHHb", buttons, x, y, wheel)


class HidgBackend(HidBackend):
    def __init__(self, device: str) -> None:
        self.device = device
        self._buttons = 0
        self._kbd = _open(device)
        try:
            self._mouse = _open(mouse_device(device))
        except Unreachable:
            os.close(self._kbd)
            raise

    def report(self, modifiers: int, usages: list[int]) -> None:
        self._write(self._kbd, keyboard_report(modifiers, usages), self.device)

    def mouse_abs(self, x: int, y: int) -> None:
        self._write(self._mouse, mouse_report(self._buttons, x, y), mouse_device(self.device))

    def mouse_buttons(self, buttons: int) -> None:
        self._buttons = buttons
        self._write(self._mouse, mouse_report(buttons), mouse_device(self.device))

    def mouse_wheel(self, notches: int) -> None:
        self._write(self._mouse, mouse_report(self._buttons, wheel=notches), mouse_device(self.device))

    def _write(self, fd: int, report: bytes, path: str) -> None:
        _, ready, _ = select.select([], [fd], [], WRITE_TIMEOUT_S)
        try:
            if not ready or os.write(fd, report) != len(report):
                raise Timeout(f"HID gadget {path}: the USB host took no report within {WRITE_TIMEOUT_S:g} s",
                              hint="is the gadget's cable in the target's USB port and the target on?", device=path)
        except BlockingIOError as exc:  # a report still in flight after poll said writable
            raise Timeout(f"HID gadget {path}: the USB host is not reading reports", device=path) from exc
        except OSError as exc:  # ESHUTDOWN: the gadget was unbound from its controller
            raise Unreachable(f"HID gadget {path}: {exc.strerror}", hint="is the gadget bound to a UDC (configfs)?",
                              device=path) from exc

    def close(self) -> None:
        for fd in (self._kbd, self._mouse):
            try:
                os.close(fd)
            except OSError:
                pass


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "nothing reads it" if exc.errno == errno.ENXIO else exc.strerror
        raise Unreachable(f"HID gadget {path}: {why}", hint="set the gadget up with configfs (docs/hid.md)",
                          device=path, outcome="none") from exc  # not opened: nothing was sent
