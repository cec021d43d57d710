"""Keyboard and mouse input (HID): one backend interface, key names, and the command words.

A backend gets reports, never text: ``report(modifiers, usages)`` for the
keyboard (USB HID boot-keyboard usage codes, at most 6 keys, all released
with an empty report), ``mouse_abs(x, y)`` in the 0..32767 logical space,
``mouse_buttons(bits)`` (pressed where the pointer is: each ``hid send`` is
its own process, so a click must not need to know the position),
``mouse_wheel(n)``. The protocols (``hid_backends/``):

    ch9329   a CH9329 UART-to-USB-HID chip on a serial port (the datasheet's frames)
    hidg     a Linux USB gadget, ``/dev/hidgN`` keyboard and ``/dev/hidg(N+1)`` absolute mouse
    qmp      a QEMU board's ``input-send-event``

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

LOGICAL_MAX = 32767
DEFAULT_PACE_MS = 20  # between a key's press and release, and after its release: no key lost (QEMU-BOARD.md)
MODIFIERS = {"ctrl": 0x01, "shift": 0x02, "alt": 0x04, "meta": 0x08, "gui": 0x08, "super": 0x08, "win": 0x08,
             "rctrl": 0x10, "rshift": 0x20, "ralt": 0x40, "altgr": 0x40}
BUTTONS = {"left": 0x01, "right": 0x02, "middle": 0x04}

# name -> (USB HID usage, QEMU qcode)
KEYS: dict[str, tuple[int, str]] = {chr(c): (0x04 + c - ord("a"), chr(c)) for c in range(ord("a"), ord("z") + 1)}
KEYS.update({str(d): (0x1E + (d - 1) % 10, str(d)) for d in range(1, 11)})
KEYS["0"] = (0x27, "0")
KEYS.pop("10", None)
KEYS.update({
    "enter": (0x28, "ret"), "esc": (0x29, "esc"), "backspace": (0x2A, "backspace"), "tab": (0x2B, "tab"),
    "space": (0x2C, "spc"), "-": (0x2D, "minus"), "=": (0x2E, "equal"), "[": (0x2F, "bracket_left"),
    "]": (0x30, "bracket_right"), "\\": (0x31, "backslash"), ";": (0x33, "semicolon"), "'": (0x34, "apostrophe"),
    "`": (0x35, "grave_accent"), ",": (0x36, "comma"), ".": (0x37, "dot"), "/": (0x38, "slash"),
    "capslock": (0x39, "caps_lock"), "insert": (0x49, "insert"), "home": (0x4A, "home"), "pageup": (0x4B, "pgup"),
    "delete": (0x4C, "delete"), "end": (0x4D, "end"), "pagedown": (0x4E, "pgdn"), "right": (0x4F, "right"),
    "left": (0x50, "left"), "down": (0x51, "down"), "up": (0x52, "up"),
})
KEYS.update({f"f{n}": (0x3A + n - 1, f"f{n}") for n in range(1, 13)})
ALIASES = {"return": "enter", "escape": "esc", "del": "delete", "bs": "backspace", "pgup": "pageup",
           "pgdn": "pagedown", "spc": "space"}
SHIFTED = dict(zip('!@#$%^&*()_+{}|:"~<>?', "1234567890-=[]\\;'`,./"))
MODIFIER_QCODES = {0x01: "ctrl", 0x02: "shift", 0x04: "alt", 0x08: "meta_l", 0x10: "ctrl_r", 0x20: "shift_r",
                   0x40: "alt_r"}
USAGE_NAMES = {usage: name for name, (usage, _) in KEYS.items()}


class HidBackend:
    """The interface (see the module docstring); ``close`` releases the rig."""

    def report(self, modifiers: int, usages: list[int]) -> None:
        raise NotImplementedError

    def mouse_abs(self, x: int, y: int) -> None:
        raise NotImplementedError

    def mouse_buttons(self, buttons: int) -> None:
        raise NotImplementedError

    def mouse_wheel(self, notches: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def open_backend(hid: dict[str, Any]) -> HidBackend:
    protocol = hid.get("protocol") or "ch9329"
    if protocol == "ch9329":
        from bench_agent.hid_backends.ch9329 import Ch9329Backend

        return Ch9329Backend(hid["device"], int(hid.get("baud") or 9600))
    if protocol == "qmp":
        from bench_agent.hid_backends.qmp import QmpBackend

        return QmpBackend(hid["device"].removeprefix("qmp:"))
    if protocol == "hidg":
        from bench_agent.hid_backends.hidg import HidgBackend

        return HidgBackend(hid["device"])
    raise NotConfigured(f"HID protocol {protocol!r} is not supported on this host yet",
                        hint="use ch9329, hidg or qmp (docs/hid.md)", protocol=protocol)


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
