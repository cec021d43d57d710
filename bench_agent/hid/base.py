"""What a HID backend needs: the ``HidBackend`` interface and the key tables (names, USB HID usages,
QEMU qcodes). The backends (``backends/``) import this module, never the channel (``channel.py``),
which picks and opens them.
"""

from __future__ import annotations

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
