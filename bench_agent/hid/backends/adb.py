"""Input on an Android target through adb: ``input keyevent``, ``input text``, ``input tap``, ``input swipe``.

An Android device has no HID rig: panio's command words map onto Android's
``input`` tool, one ``adb -s SERIAL shell input ...`` per action.

    key NAME         one Android keycode: ENTER, ESC (= BACK), BACKSPACE (DEL), HOME (the home screen),
                     UP/DOWN/LEFT/RIGHT, a..z, 0..9, and Android's own: BACK, MENU, POWER, VOLUME_UP,
                     VOLUME_DOWN, APP_SWITCH, SEARCH, WAKEUP, SLEEP. F1..F12 and combos (ctrl+c) are refused.
    type TEXT        one ``input text``: printable ASCII; spaces become ``%s``, the rest is quoted for the
                     device's shell. Text ``input text`` cannot carry (non-ASCII, tab, newline, a literal
                     ``%s``) is refused before anything is typed, never typed as something else.
    moveabs X Y      remembered (0..32767 logical units), scaled to pixels by ``wm size`` at the click
    click left       ``input tap`` there; click right = BACK (Android's mouse convention); middle refused
    scroll N         a swipe from the pointer (the centre if none): N notches of 1/20 of the screen each,
                     negative = down (the finger moves up)
"""

from __future__ import annotations

import re
import shlex

from bench_agent.adb import client
from bench_agent.errors import DeviceError, PanioError, UsageError
from bench_agent.hid.base import ALIASES, BUTTONS, KEYS, LOGICAL_MAX, HidBackend

KEYCODES = {chr(c): 29 + c - ord("a") for c in range(ord("a"), ord("z") + 1)}
KEYCODES.update({str(d): 7 + d for d in range(10)})
KEYCODES.update({
    "enter": 66, "esc": 4, "back": 4, "backspace": 67, "tab": 61, "space": 62, "delete": 112, "home": 3,
    "end": 123, "pageup": 92, "pagedown": 93, "up": 19, "down": 20, "left": 21, "right": 22, "insert": 124,
    "capslock": 115, "-": 69, "=": 70, "[": 71, "]": 72, "\\": 73, ";": 74, "'": 75, "/": 76, ",": 55, ".": 56,
    "`": 68, "menu": 82, "power": 26, "volume_up": 24, "volume_down": 25, "app_switch": 187, "recents": 187,
    "search": 84, "wakeup": 224, "sleep": 223, "camera": 27, "mute": 164,
})
FKEY = re.compile(r"^f([1-9]|1[0-2])$")
WM_SIZE = re.compile(rb"(Physical|Override) size: (\d+)x(\d+)")
SCROLL_STEP = 20  # a notch is 1/20 of the screen's height
SWIPE_MS = 100


def keycode(name: str) -> int:
    """The Android keycode for one of panio's key names (case-insensitive); ``UsageError`` for what has none."""
    low = name.lower() if len(name) > 1 else name
    low = ALIASES.get(low, low)
    if "+" in name and name != "+":
        raise UsageError(f"{name!r}: an Android target takes one key at a time, not a combination",
                         hint="send the keys one by one, or type text with `type` (docs/adb.md)", argument="key")
    if FKEY.match(low.lower()):
        raise UsageError(f"{name.upper()}: an Android device has no function keys",
                         hint="use HOME, BACK (or ESC), MENU, APP_SWITCH, POWER, VOLUME_UP/DOWN, ENTER, arrows "
                              "(docs/adb.md)", argument="key")
    code = KEYCODES.get(low) or KEYCODES.get(low.lower())
    if code is None:
        raise UsageError(f"unknown key {name!r} for an Android target",
                         hint="keys: ENTER, ESC/BACK, HOME, MENU, POWER, VOLUME_UP, UP/DOWN/LEFT/RIGHT, a..z, 0..9 "
                              "(docs/adb.md)", argument="key")
    return code


def text_argument(text: str) -> str:
    """``text`` as the one argument of ``input text``, quoted for the device's shell; refuses what cannot pass."""
    if not text:
        raise UsageError("nothing to type", argument="text")
    bad = next((c for c in text if not (c.isascii() and c.isprintable())), None)
    if bad is not None:
        raise UsageError(f"cannot type {bad!r} on an Android target: adb's `input text` carries printable ASCII "
                         "only", hint="use `key ENTER`/`key TAB` for those keys; nothing was typed",
                         argument="text")
    if "%s" in text:
        raise UsageError("cannot type a literal '%s' on an Android target: `input text` reads it as a space",
                         hint="type the text around it; nothing was typed", argument="text")
    return shlex.quote(text.replace(" ", "%s"))


class AdbBackend(HidBackend):
    """``adb:SERIAL`` (see the module docstring)."""

    def __init__(self, device: str) -> None:
        self.serial = device.removeprefix("adb:")
        try:
            client.ready(self.serial)
        except PanioError as err:  # the device was never reached: nothing was sent, safe to repeat
            err.details["outcome"] = "none"
            raise
        self._size: tuple[int, int] | None = None
        self._pos: tuple[int, int] | None = None

    def _input(self, *words: str) -> None:
        out = client.run(self.serial, ["shell", "input", *words])
        if out.strip():  # `input` prints its usage or an error and still exits 0 on old Androids
            raise DeviceError(f"adb input on {self.serial}: {out.decode('utf-8', 'replace').strip()[:200]}",
                              serial=self.serial)

    def size(self) -> tuple[int, int]:
        if self._size is None:
            found = {m.group(1): (int(m.group(2)), int(m.group(3)))
                     for m in WM_SIZE.finditer(client.run(self.serial, ["shell", "wm", "size"]))}
            size = found.get(b"Override") or found.get(b"Physical")
            if size is None:
                raise DeviceError(f"`wm size` on {self.serial} did not say the screen's size", serial=self.serial)
            self._size = size
        return self._size

    def pixels(self, x: int, y: int) -> tuple[int, int]:
        """Logical 0..32767 -> the screen's pixels (0..W-1, 0..H-1)."""
        width, height = self.size()
        return round(x * (width - 1) / LOGICAL_MAX), round(y * (height - 1) / LOGICAL_MAX)

    # -- what the channel's driver calls first when a backend has it --------------------------------------

    def key(self, name: str) -> None:
        self._input("keyevent", str(keycode(name)))

    def type_text(self, text: str) -> int:
        self._input("text", text_argument(text))
        return len(text)

    # -- the HidBackend interface -----------------------------------------------------------------------

    def report(self, modifiers: int, usages: list[int]) -> None:
        names = {usage: name for name, (usage, _) in KEYS.items()}
        for usage in usages:
            self.key(names[usage])

    def mouse_abs(self, x: int, y: int) -> None:
        self._pos = (x, y)
        path = self._pointer_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{x} {y}\n")

    def mouse_buttons(self, buttons: int) -> None:
        if buttons == BUTTONS["left"]:
            self._input("tap", *map(str, self.pixels(*self._where())))
        elif buttons == BUTTONS["right"]:
            self._input("keyevent", "4")
        elif buttons:
            raise UsageError("an Android target takes left (tap) and right (BACK) clicks only", argument="button")

    def mouse_wheel(self, notches: int) -> None:
        x, y = self.pixels(*self._where())
        height = self.size()[1]
        y2 = min(height - 1, max(0, y + notches * height // SCROLL_STEP))
        self._input("swipe", str(x), str(y), str(x), str(y2), str(SWIPE_MS))

    def _where(self) -> tuple[int, int]:
        """Where the pointer is: set by this process, else by the last `hid send moveabs` (each send is its own
        process, and Android keeps no pointer a tap could use), else the centre."""
        if self._pos is None:
            try:
                x, y = (int(v) for v in self._pointer_file().read_text().split())
                self._pos = (x, y)
            except (OSError, ValueError):
                self._pos = (LOGICAL_MAX // 2, LOGICAL_MAX // 2)
        return self._pos

    def _pointer_file(self):
        from bench_agent.paths import state_dir

        return state_dir() / "adb" / (self.serial.replace(":", "_") + ".pointer")
