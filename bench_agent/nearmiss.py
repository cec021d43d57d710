"""The near miss of a mistyped word, said the same way by every "did you mean" of panio.

difflib's ratio alone ranks a swap of two letters below a different word: ``traget`` came out as
``triage`` before ``target``. A typo is an edit, so the candidates a few edits away (a swap of two
neighbours counts as one, the optimal-string-alignment distance) win first; difflib's ratio, with the
caller's cutoff, only answers when no candidate is one edit away.
"""

from __future__ import annotations

from collections.abc import Iterable


def edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of two neighbours that turn ``a`` into ``b``."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice ``word`` most likely meant, or None: one a single edit away (the closest by difflib's ratio
    when several are), else difflib's best match at ``cutoff``."""
    import difflib

    names = [c for c in choices if isinstance(c, str)]
    if not names or len(word) > 200:  # a pasted paragraph is nobody's typo
        return None
    scored = sorted((edits(word.lower(), c.lower()), -difflib.SequenceMatcher(None, word, c).ratio(), c)
                    for c in names if abs(len(c) - len(word)) <= 1)
    if scored and scored[0][0] <= 1 and len(word) > 2:
        return scored[0][2]
    close = difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    return close[0] if close else None
