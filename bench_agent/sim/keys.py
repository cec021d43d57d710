"""What a USB keyboard's key presses become on a simulated board's console (a US layout, like a tty's)."""

from __future__ import annotations

from bench_agent.hid.base import KEYS, SHIFTED

ENTER, ESC, BACKSPACE, TAB = KEYS["enter"][0], KEYS["esc"][0], KEYS["backspace"][0], KEYS["tab"][0]
UP, DOWN, RIGHT, LEFT, F2 = KEYS["up"][0], KEYS["down"][0], KEYS["right"][0], KEYS["left"][0], KEYS["f2"][0]
SHIFT_BITS, CTRL_BITS = 0x22, 0x11
_PLAIN = {usage: name for name, (usage, _) in KEYS.items() if len(name) == 1}
_SHIFT_OF = {plain: shifted for shifted, plain in SHIFTED.items()}
_SPECIAL = {ENTER: b"\r", ESC: b"\x1b", BACKSPACE: b"\x7f", TAB: b"\t", KEYS["space"][0]: b" ",
            UP: b"\x1b[A", DOWN: b"\x1b[B", RIGHT: b"\x1b[C", LEFT: b"\x1b[D"}


def to_bytes(usage: int, modifiers: int) -> bytes:
    """The bytes a terminal gets for one key press (b"" for keys that type nothing)."""
    if usage in _SPECIAL:
        return _SPECIAL[usage]
    ch = _PLAIN.get(usage)
    if ch is None:
        return b""
    if modifiers & CTRL_BITS and ch.isalpha():
        return bytes([ord(ch) - ord("a") + 1])
    if modifiers & SHIFT_BITS:
        ch = ch.upper() if ch.isalpha() else _SHIFT_OF.get(ch, ch)
    return ch.encode()
