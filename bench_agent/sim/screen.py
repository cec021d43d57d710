"""SimScreen: the simulated board's display — its console as a text-mode screen, and a setup menu.

Everything the console prints goes through a small terminal (80x25, CR, LF,
backspace; escape sequences dropped) and is drawn in a monospace font, light
grey on black like a VGA text console. Powered off, the screen is black.
Pressing F2 on the HID keyboard while the board boots opens the *setup
menu* (the firmware's, so only the screen and the HID rig reach it): arrow
keys and ENTER, or a mouse click on an item; "Save and exit" stores the
settings and reboots. Frames are served as MJPEG by ``sim.mjpeg``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

COLS, ROWS = 80, 25
FG, BG = (200, 200, 200), (0, 0, 0)
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",)
FONT_PX = 16


class Terminal:
    """A minimal text terminal: enough for a boot log and a shell."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.rows = [[" "] * COLS for _ in range(ROWS)]
        self.x = self.y = 0
        self._esc = ""

    def feed(self, data: bytes) -> None:
        for ch in data.decode("latin-1"):
            self._char(ch)

    def _char(self, ch: str) -> None:
        if self._esc:
            self._esc += ch
            if len(self._esc) > 1 and (self._esc[1] != "[" or ch.isalpha() or len(self._esc) > 16):
                self._esc = ""
            return
        if ch == "\x1b":
            self._esc = ch
        elif ch == "\r":
            self.x = 0
        elif ch == "\n":
            self._newline()
        elif ch == "\b":
            self.x = max(0, self.x - 1)
        elif ch.isprintable():
            if self.x >= COLS:
                self.x = 0
                self._newline()
            self.rows[self.y][self.x] = ch
            self.x += 1

    def _newline(self) -> None:
        if self.y == ROWS - 1:
            self.rows = self.rows[1:] + [[" "] * COLS]
        else:
            self.y += 1

    def lines(self) -> list[str]:
        return ["".join(r) for r in self.rows]


@dataclass
class SetupMenu:
    """The firmware setup screen: items toggled with ENTER or a click."""

    settings: dict[str, Any] = field(default_factory=lambda: {"network_boot": False})
    selected: int = 0
    ITEMS = ("network_boot", "boot_order", "save", "discard")
    TOP_ROW = 6

    def lines(self) -> list[str]:
        out = [""] * ROWS
        out[1] = "Setup Utility".center(COLS)
        out[2] = "panio simulated firmware".center(COLS)
        out[4] = "  Use UP/DOWN and ENTER, or click an item. ESC leaves without saving."
        for i, item in enumerate(self.ITEMS):
            out[self.TOP_ROW + 2 * i] = f"    {self._label(item)}"
        return out

    def _label(self, item: str) -> str:
        if item == "network_boot":
            return f"Network boot ........ [{'Enabled' if self.settings['network_boot'] else 'Disabled'}]"
        return {"boot_order": "Boot order .......... [MMC, Network]", "save": "Save and exit",
                "discard": "Exit without saving"}[item]

    def row_of(self, index: int) -> int:
        return self.TOP_ROW + 2 * index

    def item_at(self, row: int) -> int | None:
        index, rem = divmod(row - self.TOP_ROW, 2)
        return index if rem == 0 and 0 <= index < len(self.ITEMS) else None

    def activate(self, index: int) -> str | None:
        """Select item ``index`` and act on it: returns "save" or "discard" when the menu closes."""
        self.selected = index
        item = self.ITEMS[index]
        if item == "network_boot":
            self.settings["network_boot"] = not self.settings["network_boot"]
        return item if item in ("save", "discard") else None


class SimScreen:
    """The board's display; ``frame()`` renders it (BGR numpy), ``version`` grows on every change."""

    def __init__(self) -> None:
        self.term = Terminal()
        self.menu: SetupMenu | None = None
        self.powered = True
        self.version = 0
        self.changed = threading.Condition()
        self._font = _font()
        self.cell_w, self.cell_h = _cell(self._font)
        self.width, self.height = self.cell_w * COLS, self.cell_h * ROWS
        self._cache: tuple[int, Any] | None = None

    def _bump(self) -> None:
        with self.changed:
            self.version += 1
            self.changed.notify_all()

    def console_output(self, data: bytes) -> None:
        self.term.feed(data)
        if self.menu is None:
            self._bump()

    def power(self, on: bool) -> None:
        self.powered = on
        self.term.clear()
        self.menu = None
        self._bump()

    def open_menu(self, settings: dict[str, Any]) -> None:
        self.menu = SetupMenu(dict(settings))
        self._bump()

    def close_menu(self) -> None:
        self.menu = None
        self.term.clear()
        self._bump()

    def menu_changed(self) -> None:
        self._bump()

    def cell_at(self, x_px: int, y_px: int) -> tuple[int, int]:
        return x_px // self.cell_w, y_px // self.cell_h

    def frame(self) -> Any:
        """The current picture, rendered once per version."""
        version = self.version
        if self._cache is None or self._cache[0] != version:
            self._cache = (version, self._render())
        return self._cache[1]

    def _render(self) -> Any:
        import numpy as np
        from PIL import Image, ImageDraw

        img = Image.new("RGB", (self.width, self.height), BG)
        if self.powered:
            draw = ImageDraw.Draw(img)
            lines = self.menu.lines() if self.menu else self.term.lines()
            hi = self.menu.row_of(self.menu.selected) if self.menu else None
            for row, text in enumerate(lines):
                y = row * self.cell_h
                if row == hi:
                    draw.rectangle([0, y, self.width, y + self.cell_h - 1], fill=FG)
                draw.text((0, y), text.rstrip(), font=self._font, fill=BG if row == hi else FG)
        return np.ascontiguousarray(np.asarray(img)[:, :, ::-1])


def _font() -> Any:
    from PIL import ImageFont

    for path in FONT_PATHS:
        try:
            return ImageFont.truetype(path, FONT_PX)
        except OSError:
            continue
    return ImageFont.load_default(size=FONT_PX)  # Pillow's bundled font: proportional, but legible


def _cell(font: Any) -> tuple[int, int]:
    left, top, right, bottom = font.getbbox("M")
    ascent, descent = font.getmetrics()
    return max(8, round(font.getlength("M"))), ascent + descent + 2

