"""Keyboard and mouse input (HID): one backend interface, key names, and the command words.

A backend gets reports, never text: ``report(modifiers, usages)`` for the
keyboard (USB HID boot-keyboard usage codes, at most 6 keys, all released
with an empty report), ``mouse_abs(x, y)`` in the 0..32767 logical space,
``mouse_buttons(bits)`` (pressed where the pointer is: each ``hid send`` is
its own process, so a click must not need to know the position),
``mouse_wheel(n)``. The protocols (``hid/backends/``):

    ch9329   a CH9329 UART-to-USB-HID chip on a serial port (the datasheet's frames)
    hidg     a Linux USB gadget, ``/dev/hidgN`` keyboard and ``/dev/hidg(N+1)`` absolute mouse
    qmp      a QEMU board's ``input-send-event``
    adb      an Android device's ``input`` tool (keyevent, text, tap, swipe): backends/adb.py, docs/adb.md

The command words (``panio hid send T ...``, MCP ``hid_send``):

    key NAME[+NAME...]      ENTER, F2, ctrl+alt+del, shift+TAB, a, 1 ...
    type TEXT...            US-layout printable ASCII, one key at a time, paced
    moveabs X Y             absolute pointer, 0..32767 logical units (not pixels)
    click [left|right|middle]
    scroll N                wheel notches, negative = down
"""

from __future__ import annotations

import time
from typing import Any

from bench_agent.errors import NotConfigured, UsageError
from bench_agent.hid.base import ALIASES, BUTTONS, DEFAULT_PACE_MS, KEYS, LOGICAL_MAX, MODIFIERS, SHIFTED, HidBackend

def open_backend(hid: dict[str, Any]) -> HidBackend:
    protocol = hid.get("protocol") or "ch9329"
    if protocol == "ch9329":
        from bench_agent.hid.backends.ch9329 import Ch9329Backend

        from bench_agent.hid.backends.ch9329 import DEFAULT_BAUD

        ms = hid.get("reply_timeout_ms")
        return Ch9329Backend(hid["device"], int(hid.get("baud") or DEFAULT_BAUD), ms / 1000 if ms else None)
    if protocol == "qmp":
        from bench_agent.hid.backends.qmp import QmpBackend

        return QmpBackend(hid["device"].removeprefix("qmp:"))
    if protocol == "adb":
        from bench_agent.hid.backends.adb import AdbBackend

        return AdbBackend(hid["device"])
    if protocol == "hidg":
        from bench_agent.hid.backends.hidg import HidgBackend

        return HidgBackend(hid["device"])
    raise NotConfigured(f"HID protocol {protocol!r} is not supported on this host yet",
                        hint="use ch9329, hidg, qmp or adb (docs/hid.md)", protocol=protocol)


def parse_combo(text: str) -> tuple[int, list[int]]:
    """``ctrl+alt+del`` -> (modifier bits, [usage, ...])."""
    mods, usages = 0, []
    for word in text.split("+") if text != "+" else ["+"]:
        name = word.lower() if len(word) > 1 else word
        name = ALIASES.get(name, name)
        if name in MODIFIERS:
            mods |= MODIFIERS[name]
        elif name in SHIFTED:
            mods |= MODIFIERS["shift"]
            usages.append(KEYS[SHIFTED[name]][0])
        elif name.lower() in KEYS:
            if len(name) == 1 and name.isupper():
                mods |= MODIFIERS["shift"]
            usages.append(KEYS[name.lower()][0])
        else:
            raise UsageError(f"unknown key {word!r} in {text!r}", hint="keys: ENTER, ESC, TAB, F1..F12, UP, "
                             "ctrl+alt+del, a..z, 0..9 (docs/hid.md)", argument="key")
    if len(usages) > 6:
        raise UsageError(f"{text!r} presses more than 6 keys at once (a boot keyboard's limit)", argument="key")
    return mods, usages


def char_report(ch: str) -> tuple[int, int]:
    """The (modifiers, usage) that types ``ch`` on a US layout."""
    if ch in ("\n", "\r"):
        return 0, KEYS["enter"][0]
    if ch == " ":
        return 0, KEYS["space"][0]
    if ch == "\t":
        return 0, KEYS["tab"][0]
    if ch in SHIFTED:
        return MODIFIERS["shift"], KEYS[SHIFTED[ch]][0]
    if ch.isascii() and ch.isalpha():
        return (MODIFIERS["shift"] if ch.isupper() else 0), KEYS[ch.lower()][0]
    if ch in KEYS and len(ch) == 1:
        return 0, KEYS[ch][0]
    raise UsageError(f"cannot type {ch!r}: only printable ASCII on a US layout", argument="text")


def check_logical(name: str, value: int) -> int:
    if not 0 <= value <= LOGICAL_MAX:
        raise UsageError(f"{name} must be 0..{LOGICAL_MAX} (logical units: 0 = left/top edge, {LOGICAL_MAX} = "
                         f"right/bottom; not pixels), not {value}", argument=name)
    return value


class Driver:
    """Runs command words on a backend, pacing each key so none is lost."""

    def __init__(self, backend: HidBackend, pace_ms: int = DEFAULT_PACE_MS) -> None:
        self.backend, self.pace_s = backend, pace_ms / 1000

    def tap(self, mods: int, usages: list[int]) -> None:
        self.backend.report(mods, usages)
        time.sleep(self.pace_s)
        self.backend.report(0, [])
        time.sleep(self.pace_s)

    def type_text(self, text: str) -> int:
        own = getattr(self.backend, "type_text", None)  # a backend that types whole text (adb's `input text`)
        if own is not None:
            return own(text)
        reports = [char_report(ch) for ch in text]  # refuse the whole text before typing any of it
        for mods, usage in reports:
            self.tap(mods, [usage])
        return len(reports)

    def click(self, button: str) -> None:
        self.backend.mouse_buttons(BUTTONS[button])
        time.sleep(self.pace_s)
        self.backend.mouse_buttons(0)


def run_words(driver: Driver, words: list[str]) -> dict[str, Any]:
    """Run one command (``["key", "ENTER"]``, ``["type", "hello"]``, ...); returns what was done."""
    if not words:
        raise UsageError("give a HID command: key NAME | type TEXT | moveabs X Y | click [BUTTON] | scroll N")
    verb, rest = words[0].lower(), words[1:]
    if verb == "key" and len(rest) == 1:
        own = getattr(driver.backend, "key", None)  # a backend with key names of its own (adb's keycodes)
        if own is not None:
            own(rest[0])
        else:
            driver.tap(*parse_combo(rest[0]))
        return {"verb": "key", "key": rest[0]}
    if verb == "type" and rest:
        return {"verb": "type", "chars": driver.type_text(" ".join(rest))}
    if verb == "moveabs" and len(rest) == 2:
        x, y = check_logical("x", _int(rest[0], "x")), check_logical("y", _int(rest[1], "y"))
        driver.backend.mouse_abs(x, y)
        return {"verb": "moveabs", "x": x, "y": y}
    if verb == "click" and len(rest) <= 1:
        button = (rest or ["left"])[0].lower()
        if button not in BUTTONS:
            raise UsageError(f"unknown button {button!r}: left, right or middle", argument="button")
        driver.click(button)
        return {"verb": "click", "button": button}
    if verb == "scroll" and len(rest) == 1:
        notches = _int(rest[0], "notches")
        if not -127 <= notches <= 127:
            raise UsageError(f"scroll takes -127..127 notches, not {notches}", argument="notches")
        driver.backend.mouse_wheel(notches)
        return {"verb": "scroll", "notches": notches}
    raise UsageError(f"bad HID command {' '.join(words)!r}",
                     hint="key NAME | type TEXT | moveabs X Y (0..32767) | click [left|right|middle] | scroll N")


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, not {text!r}", argument=name) from None
