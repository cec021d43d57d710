"""The QEMU board: a real Linux kernel under TCG, driven through panio's real drivers.

Boots once for the module (`panio-sim up --qemu`, ~6-15 s): the screen comes
through QMP ``screendump`` into the capture daemon and is read by tesseract;
keys go in through QMP ``input-send-event``; power through the board's hooks.
"""

from __future__ import annotations

import os
import re
import time

import pytest
import serial

from conftest import Panio
from simbench import SimBench, qemu_missing, read_until, sim_bench

BOOT_TIMEOUT_S = 240  # a TCG boot on a loaded 2-core machine: 40 s beside two CPU hogs, over 90 s at load 30


pytestmark = [pytest.mark.skipif(qemu_missing() is not None, reason=qemu_missing() or "")]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qemu")
    (tmp / "home").mkdir()
    with sim_bench(Panio(tmp), tmp / "sim", "--qemu", boards=0, video=("qemu0",)) as bench:
        yield bench


def wait_screen(p: SimBench, pattern: str, timeout_s: float = BOOT_TIMEOUT_S) -> str:
    """Read the screen after each change (video shot --changed-since blocks: no busy loop) until it matches."""
    end, text, last = time.monotonic() + timeout_s, "", None
    while time.monotonic() < end:
        text = p("video", "read", "qemu0", "--timeout", "10000").out
        if re.search(pattern, text):
            return text
        h = p("video", "shot", "qemu0", "-o", os.devnull, "--json", "--timeout", "10000").json()["hash"]
        if h == last:
            p("video", "shot", "qemu0", "-o", os.devnull, "--changed-since", h, "--timeout", "20000", check=False)
        last = h
    raise AssertionError(f"{pattern!r} never on the screen; last read:\n{text}")


def test_the_boot_screen_shows_the_kernel_banner(board):
    text = wait_screen(board, r"Linux version \d+\.\d+")
    assert "panio QEMU board" in text
    wait_screen(board, r"(?m)^qemu(\S? ?[#\w]+)?\s*$")  # busybox's prompt on tty1: a line of its own (the OCR
    # reads its '#' as 'it', or, with the small-font path for VGA text, not at all: docs/video.md)


def test_keys_typed_through_qmp_reach_the_console(board):
    wait_screen(board, r"Type here")
    board("hid", "send", "qemu0", "type", "echo Shown-$((6*7))")
    board("hid", "send", "qemu0", "key", "ENTER")
    assert "Shown-42" in wait_screen(board, r"Shown-42", 60)


def test_200_characters_typed_through_qmp_arrive_exactly(board):
    text = ("The-quick_brown.fox:jumps/over=the+lazy,dog;0123456789@%^&*()[]{}<>?!~" * 3)[:200]
    with serial.Serial(str(board.dir / "qemu0.tty"), 115200, timeout=0.2) as ttys0:
        ttys0.reset_input_buffer()
        board("hid", "send", "qemu0", "type", f"echo '{text}' > /dev/ttyS0")  # default pace: 10 ms lost a key on a loaded 2-core machine
        board("hid", "send", "qemu0", "key", "ENTER")
        buf, end = b"", time.monotonic() + 60
        while text.encode() not in buf and time.monotonic() < end:
            buf += ttys0.read(4096)
    assert text.encode() + b"\r\n" in buf, buf[-400:]


def _tablet_modules() -> bool:
    from bench_agent.sim import qemu_image

    return bool(qemu_image.modules(qemu_image.kernel()))


@pytest.mark.skipif(not _tablet_modules(), reason="no USB/HID modules for this kernel (scripts/qemu-board-image.sh "
                    "extracts them with the kernel)")
def test_moveabs_reaches_the_guest_in_the_0_to_32767_logical_space(board):
    """The guest's own evdev sees the usb-tablet at the logical coordinates panio sent, not pixels."""
    find = ("T=/dev/input/$(basename $(dirname $(dirname $(grep -l Tablet /sys/class/input/event*/device/name))));"
            " od -An -tu2 -w24 $T > /dev/ttyS0 & P=$!;"
            " until ls -l /proc/$P/fd | grep -q input; do sleep 0.1; done; echo od-reads-the-tablet > /dev/ttyS0")
    with serial.Serial(str(board.dir / "qemu0.tty"), 115200, timeout=0.2) as ttys0:
        ttys0.reset_input_buffer()
        board("hid", "send", "qemu0", "type", find)
        board("hid", "send", "qemu0", "key", "ENTER")
        read_until(ttys0, b"od-reads-the-tablet\r\n", BOOT_TIMEOUT_S)  # od has the device open: no event is lost
        board("hid", "send", "qemu0", "moveabs", "32767", "16384")
        board("hid", "send", "qemu0", "click", "left")
        buf, end = b"", time.monotonic() + 60
        events = []
        while time.monotonic() < end:
            buf += ttys0.read(4096)
            events = [tuple(map(int, line.split()[8:12])) for line in buf.decode(errors="replace").splitlines()
                      if len(line.split()) == 12]
            if (1, 272, 0, 0) in events:  # the click's release: everything before it has arrived
                break
    assert (3, 0, 32767, 0) in events, events  # EV_ABS ABS_X 32767
    assert (3, 1, 16384, 0) in events, events  # EV_ABS ABS_Y 16384
    assert (1, 272, 1, 0) in events, events  # EV_KEY BTN_LEFT pressed


def test_power_cycle_reboots_and_the_screen_is_read_again(board):
    """Seed R3 on a real kernel: power-cycle, wait for the boot screen, read it."""
    before = board("video", "shot", "qemu0", "-o", os.devnull, "--json").json()["hash"]
    board("power-cycle", "qemu0")
    board("video", "shot", "qemu0", "-o", os.devnull, "--changed-since", before, "--timeout", "20000")
    assert "Shown-42" not in wait_screen(board, r"Linux version \d+\.\d+")
    assert "Power ON" in board("power-state", "qemu0").out


def test_power_off_stops_the_vm_and_the_picture(board):
    board("power", "off", "qemu0")
    assert "Power OFF" in board("power-state", "qemu0").out
    r = board.fails("video", "shot", "qemu0", "-o", os.devnull, "--timeout", "3000", code=22)
    assert "no picture" in r.error["message"]
