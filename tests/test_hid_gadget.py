"""The hidg backend (a Linux USB HID gadget) against what f_hid would hand the USB host.

No USB device controller can be loaded on this machine (no dummy_hcd or
libcomposite module), so the far end is a FIFO per gadget node: f_hid turns
each write() into one interrupt-IN report, and a FIFO keeps the same bytes in
order. The reports are checked byte for byte, and decoded with the report
descriptors panio documents (a small HID descriptor parser below), so the
descriptor, the report layout and the bytes on the wire cannot drift apart.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from bench_agent.hid.backends import hidg
from hidhelp import FhidHost

ROOT = Path(__file__).resolve().parent.parent
F_SETPIPE_SZ = 1031


def input_fields(descriptor: bytes) -> list[dict]:
    """The Input items of a HID report descriptor (short items only): bit offset, size, count, range, flags."""
    fields, glob, offset, i = [], {"size": 0, "count": 0, "min": 0, "max": 0}, 0, 0
    while i < len(descriptor):
        prefix = descriptor[i]
        n = {0: 0, 1: 1, 2: 2, 3: 4}[prefix & 3]
        raw = descriptor[i + 1:i + 1 + n]
        value = int.from_bytes(raw, "little", signed=prefix & 0xFC in (0x14, 0x24) and n > 0)
        tag = prefix & 0xFC
        if tag == 0x74:
            glob["size"] = value
        elif tag == 0x94:
            glob["count"] = value
        elif tag == 0x14:
            glob["min"] = value
        elif tag == 0x24:
            glob["max"] = value
        elif tag == 0x80:
            fields.append({"offset": offset, **glob, "flags": value})
            offset += glob["size"] * glob["count"]
        i += 1 + n
    return fields


def report_bytes(descriptor: bytes) -> int:
    last = input_fields(descriptor)[-1]
    return (last["offset"] + last["size"] * last["count"]) // 8


def test_the_documented_descriptors_declare_the_reports_the_backend_writes():
    assert report_bytes(hidg.KEYBOARD_DESCRIPTOR) == hidg.KEYBOARD_REPORT_LEN == 8
    assert report_bytes(hidg.MOUSE_DESCRIPTOR) == hidg.MOUSE_REPORT_LEN == 6
    buttons, pad, xy, wheel = input_fields(hidg.MOUSE_DESCRIPTOR)
    assert (buttons["offset"], buttons["count"], pad["size"]) == (0, 3, 5)
    assert (xy["offset"], xy["size"], xy["count"], xy["min"], xy["max"]) == (8, 16, 2, 0, 32767)
    assert xy["flags"] & 0x40, "X/Y need the Null State flag: a click report carries no position"
    assert hidg.NULL_XY > xy["max"]
    assert (wheel["offset"], wheel["min"], wheel["max"], wheel["flags"] & 0x04) == (40, -127, 127, 0x04)
    docs = (ROOT / "docs" / "hid.md").read_text()
    for d in (hidg.KEYBOARD_DESCRIPTOR, hidg.MOUSE_DESCRIPTOR):  # the configfs script writes these bytes
        assert "".join(f"\\x{b:02x}" for b in d) in docs


@pytest.fixture
def gadget(panio, tmp_path):
    kbd, mouse = FhidHost(tmp_path / "hidg0", 8), FhidHost(tmp_path / "hidg1", 6)
    panio("init")
    panio("target", "add", "pc")
    panio("hid", "set", "-t", "pc", "--device", str(tmp_path / "hidg0"), "--protocol", "hidg")
    yield panio, kbd, mouse
    kbd.close()
    mouse.close()


def up() -> bytes:
    return bytes(8)


def test_keys_modifiers_and_typing_reach_the_host_as_boot_keyboard_reports(gadget):
    panio, kbd, _ = gadget
    panio("hid", "send", "pc", "key", "ctrl+alt+del")
    assert kbd.reports(2) == [bytes([0x05, 0, 0x4C, 0, 0, 0, 0, 0]), up()]
    panio("hid", "send", "pc", "key", "F2")
    assert kbd.reports(2) == [bytes([0, 0, 0x3B, 0, 0, 0, 0, 0]), up()]
    r = panio("hid", "send", "pc", "--json", "type", "aZ!").json()
    assert (r["protocol"], r["chars"]) == ("hidg", 3)
    assert kbd.reports(6) == [bytes([0, 0, 0x04, 0, 0, 0, 0, 0]), up(),
                              bytes([0x02, 0, 0x1D, 0, 0, 0, 0, 0]), up(),   # Z = shift + z
                              bytes([0x02, 0, 0x1E, 0, 0, 0, 0, 0]), up()]   # ! = shift + 1


def test_absolute_move_click_and_wheel_reach_the_host_as_mouse_reports(gadget):
    panio, _, mouse = gadget
    panio("hid", "send", "pc", "moveabs", "16384", "32767")
    assert mouse.reports(1) == [bytes([0, 0x00, 0x40, 0xFF, 0x7F, 0])]  # logical units as they are, LE
    panio("hid", "send", "pc", "click", "right")
    assert mouse.reports(2) == [bytes([0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0]), bytes([0, 0xFF, 0xFF, 0xFF, 0xFF, 0])]
    panio("hid", "send", "pc", "scroll", "-3")
    assert mouse.reports(1) == [bytes([0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFD])]


def test_the_hid_daemon_holds_the_gadget(gadget):
    panio, kbd, mouse = gadget
    panio("hid", "serve", "pc")
    try:
        assert panio("hid", "send", "pc", "--json", "key", "ENTER").json()["via"] == "daemon"
        assert kbd.reports(2) == [bytes([0, 0, 0x28, 0, 0, 0, 0, 0]), up()]
        panio("hid", "send", "pc", "click")
        assert [r[0] for r in mouse.reports(2)] == [1, 0]
    finally:
        panio("hid", "stop", "pc")


def test_a_host_that_takes_no_report_is_a_timeout_not_a_hang(gadget, tmp_path):
    panio, kbd, _ = gadget
    kbd.halt()
    fcntl.fcntl(kbd.fd, F_SETPIPE_SZ, 4096)
    os.write(kbd.fd, bytes(4096))  # the host stopped reading: the report queue is full
    started = time.monotonic()
    r = panio.fails("hid", "send", "pc", "key", "a", code=22)
    assert "took no report" in r.error["message"] and time.monotonic() - started < 30  # bounded, not a hang


def test_a_gadget_that_is_missing_or_unread_is_unreachable(panio, tmp_path):
    panio("init")
    panio("target", "add", "pc")
    panio("hid", "set", "-t", "pc", "--device", str(tmp_path / "hidg0"), "--protocol", "hidg")
    r = panio.fails("hid", "send", "pc", "key", "a", code=4)
    assert "hidg0" in r.error["message"] and "configfs" in r.error["hint"]
    os.mkfifo(tmp_path / "hidg0")
    os.mkfifo(tmp_path / "hidg1")
    assert "nothing reads it" in panio.fails("hid", "send", "pc", "key", "a", code=4).error["message"]
