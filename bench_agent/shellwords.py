"""A command line split into words as ``shlex.split`` splits it, in time linear in its length.

``shlex`` grows each word one character at a time (``self.token += nextchar``, an attribute, so CPython cannot
extend the string in place): a job step with a 1 MB word took 29-43 s to check. Here each run of ordinary
characters, each quoted string and each escape is one regular-expression match (none of them can backtrack),
joined once per word. Same rules as ``shlex.split(text)`` (POSIX mode, no comments): blanks are space, tab, CR and
LF; ``'...'`` is literal; in ``"..."`` a backslash escapes only ``"`` and itself; outside quotes it escapes any
character; an empty quoted string is a word.
"""

from __future__ import annotations

import re

_PIECE = re.compile(r"""(?P<blank>[ \t\r\n]+)|'(?P<single>[^']*)'|"(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"|\\(?P<escaped>.)"""
                    r"""|(?P<plain>[^ \t\r\n'"\\]+)|(?P<open>['"\\])""", re.S)
_IN_DOUBLE = re.compile(r"""\\(["\\])""")


def split(text: str) -> list[str]:
    """The words of ``text``; ``ValueError`` for an unclosed quote or a backslash at the end, as ``shlex``."""
    words: list[str] = []
    pieces: list[str] = []
    started = False
    for m in _PIECE.finditer(text):
        kind = m.lastgroup
        if kind == "blank":
            if started:
                words.append("".join(pieces))
                pieces, started = [], False
            continue
        if kind == "open":
            raise ValueError("No escaped character" if m.group() == "\\" else "No closing quotation")
        piece = m.group(kind)
        pieces.append(_IN_DOUBLE.sub(r"\1", piece) if kind == "double" else piece)
        started = True
    if started:
        words.append("".join(pieces))
    return words
