"""Find the line and column of a key path in TOML text, for error messages.

A light line scanner, not a parser: it follows ``[table]`` and ``[[array]]``
headers and ``key =`` lines, and answers with the line that best matches the
path (the key itself, else the closest enclosing table). Good enough to point
a person at the right line of a hand-written lab file.
"""

from __future__ import annotations

import re
from typing import Any

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _split_key(raw: str) -> list[str]:
    parts, buf, quote = [], "", None
    for ch in raw:
        if quote:
            if ch == quote:
                quote = None
            else:
                buf += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(buf.strip())
            buf = ""
        else:
            buf += ch
    parts.append(buf.strip())
    return parts


def locate(text: str, path: tuple[Any, ...]) -> tuple[int, int]:
    """Return (line, column), 1-based, of ``path`` in ``text``; (1, 1) if not found."""
    best, best_len = (1, 1), -1
    header: list[Any] = []
    aot_counts: dict[tuple, int] = {}
    in_multiline = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
            in_multiline = not in_multiline
            if not in_multiline:
                continue
        if in_multiline and not _KEY.match(line):
            continue
        m = _HEADER.match(line)
        if m and not _KEY.match(line):
            keys = _split_key(m.group(2))
            if m.group(1) == "[[":
                k = tuple(keys)
                aot_counts[k] = aot_counts.get(k, -1) + 1
                header = keys + [aot_counts[k]]
            else:
                header = _expand_aot(keys, aot_counts)
            here = tuple(header)
            col = line.index("[") + 1
        else:
            km = _KEY.match(line)
            if not km:
                continue
            here = tuple(header) + tuple(_split_key(km.group(1)))
            col = len(line) - len(line.lstrip()) + 1
        # an array-of-tables header also stands for the array itself (an unknown key `[[step]]`)
        for cand in (here, here[:-1]) if m and m.group(1) == "[[" and not _KEY.match(line) else (here,):
            n = _common_prefix(cand, path)
            if n == len(cand) and n > best_len:
                best, best_len = (lineno, col), n
    return best


def _expand_aot(keys: list[str], aot_counts: dict[tuple, int]) -> list[Any]:
    """``[a.b.c]`` under ``[[a.b]]`` means element N of a.b; insert the index."""
    out: list[Any] = []
    for i, key in enumerate(keys):
        out.append(key)
        prefix = tuple(keys[: i + 1])
        if prefix in aot_counts and i + 1 < len(keys):
            out.append(aot_counts[prefix])
    return out


def _common_prefix(a: tuple, b: tuple) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
