"""Command lines as the docs and skills write them, made concrete enough to parse (placeholders filled)."""

from __future__ import annotations

NUMERIC = {"N", "SEQ", "MS"}
PLACEHOLDERS = NUMERIC | {"NAME", "PATH", "IFACE", "DIR", "CMD", "SERIAL", "PORT", "ACTION", "H", "T", "L", "TARGET", "HOST"}


def concrete(token: str) -> str:
    """A placeholder word (`N`, `TARGET`, ...) as a value the parser takes; any other word as it is."""
    if token in PLACEHOLDERS:
        return "1" if token in NUMERIC else "x"
    return token
