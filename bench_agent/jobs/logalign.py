"""Two runs' logs, line against line: normalise what always changes, then align (patience anchors, difflib within).

``normalise`` rewrites what differs between any two runs of the same job on the
same board (the serial log's time and sequence prefix, timestamps, uptime
brackets, hex addresses, PIDs, job ids, counters, durations) into fixed
placeholders, plus the job's own ``[triage] ignore`` patterns. Everything else
stays, so a changed version string or a new panic line still differs.

``align`` pairs the lines of a passing run (``a``) with those of a failing run
(``b``). It is linear in practice, never quadratic on a long log:

1. the common head and tail go first (two runs of one job mostly agree);
2. in what remains, lines found exactly once on each side are anchors, and the
   longest increasing run of them (patience diff, O(n log n)) fixes the order;
3. between two anchors, a small gap is aligned by ``difflib.SequenceMatcher``
   on line ids (``autojunk`` off: a boot log's repeated lines are not noise),
   a large one is left as a replacement.

Lines are compared as small integers (one id per distinct normalised line), so
a 100,000-line log costs a few dict look-ups a line (benchmarks/triage_align.py).
"""

from __future__ import annotations

import bisect
import difflib
import re
from typing import Iterable, NamedTuple

GAP_MAX = 2000  # lines on each side that SequenceMatcher aligns between two anchors; beyond: replaced

# (pattern, placeholder), applied in order. The serial log's own prefix goes first ("[12:00:01.234] #17 ").
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    (r"^\[\d\d:\d\d:\d\d(?:\.\d+)?\] (?:#\d+\*? )?", ""),
    (r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?", "<time>"),
    (r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b", "<time>"),
    (r"\[\s*\d+\.\d+\]", "[<uptime>]"),
    (r"\b0x[0-9a-fA-F]+\b", "<hex>"),
    (r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b", "<hex>"),
    (r"\b(pid|PID|Pid)([ =:]+)\d+", r"\1\2<pid>"),
    (r"\b([A-Za-z_][\w.-]*)\[\d+\]", r"\1[<pid>]"),
    (r"\b([Jj]ob)([ _#:=-]*(?:id)?[ #:=]*)\d+", r"\1\2<id>"),
    (r"#\d+", "#<n>"),
    (r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|ns|s|sec|secs|seconds)\b", "<dur>"),
    (r"\b1[5-9]\d{8}(?:\.\d+)?\b", "<epoch>"),
)


class Rules:
    """The normalisation of one comparison: the defaults, then the job's ``[triage] ignore`` patterns (each match
    becomes ``<ignored>``)."""

    def __init__(self, ignore: Iterable[str] = ()) -> None:
        self.rules = [(re.compile(p), r) for p, r in DEFAULT_RULES]
        self.rules += [(re.compile(p), "<ignored>") for p in ignore]

    def __call__(self, line: str) -> str:
        line = line.rstrip("\r\n ").replace("\r", "")
        for pattern, repl in self.rules:
            line = pattern.sub(repl, line)
        return line


def normalise(lines: list[str], rules: Rules | None = None) -> list[str]:
    rules = rules or Rules()
    return [rules(line) for line in lines]


class Block(NamedTuple):
    """``a[a0:a1]`` against ``b[b0:b1]``: ``equal``, ``insert`` (only in b), ``delete`` (only in a), ``replace``."""

    tag: str
    a0: int
    a1: int
    b0: int
    b1: int


def align(a: list[str], b: list[str]) -> list[Block]:
    """The alignment of two (normalised) logs as blocks in order, covering both."""
    ids: dict[str, int] = {}
    ia = [ids.setdefault(x, len(ids)) for x in a]
    ib = [ids.setdefault(x, len(ids)) for x in b]
    pairs = _matches(ia, ib, 0, len(ia), 0, len(ib))
    return _blocks(pairs, len(ia), len(ib))


def _matches(a: list[int], b: list[int], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    """Matched index pairs (i in a, j in b), increasing in both."""
    head: list[tuple[int, int]] = []
    while a0 < a1 and b0 < b1 and a[a0] == b[b0]:
        head.append((a0, b0))
        a0, b0 = a0 + 1, b0 + 1
    tail: list[tuple[int, int]] = []
    while a0 < a1 and b0 < b1 and a[a1 - 1] == b[b1 - 1]:
        a1, b1 = a1 - 1, b1 - 1
        tail.append((a1, b1))
    tail.reverse()
    if a0 == a1 or b0 == b1:
        return head + tail
    anchors = _anchors(a, b, a0, a1, b0, b1)
    if not anchors:
        return head + _small_gap(a, b, a0, a1, b0, b1) + tail
    middle: list[tuple[int, int]] = []
    pa, pb = a0, b0
    for i, j in anchors:
        middle += _matches(a, b, pa, i, pb, j)
        middle.append((i, j))
        pa, pb = i + 1, j + 1
    middle += _matches(a, b, pa, a1, pb, b1)
    return head + middle + tail


def _anchors(a: list[int], b: list[int], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    """Lines found exactly once in ``a[a0:a1]`` and once in ``b[b0:b1]``, longest run in order on both sides."""
    count_a: dict[int, int] = {}
    where_a: dict[int, int] = {}
    for i in range(a0, a1):
        x = a[i]
        count_a[x] = count_a.get(x, 0) + 1
        where_a[x] = i
    count_b: dict[int, int] = {}
    where_b: dict[int, int] = {}
    for j in range(b0, b1):
        x = b[j]
        count_b[x] = count_b.get(x, 0) + 1
        where_b[x] = j
    pairs = [(where_a[x], where_b[x]) for x in sorted(where_b, key=where_b.get)
             if count_b[x] == 1 and count_a.get(x) == 1]
    return _longest_increasing(pairs)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Pairs sorted by j: the longest subsequence whose i also increases (patience sorting)."""
    tops: list[int] = []  # the i at the top of each pile
    top_at: list[int] = []  # index into pairs of each pile's top
    back: list[int] = [-1] * len(pairs)
    for k, (i, _) in enumerate(pairs):
        pile = bisect.bisect_left(tops, i)
        back[k] = top_at[pile - 1] if pile else -1
        if pile == len(tops):
            tops.append(i)
            top_at.append(k)
        else:
            tops[pile], top_at[pile] = i, k
    out: list[tuple[int, int]] = []
    k = top_at[-1] if top_at else -1
    while k >= 0:
        out.append(pairs[k])
        k = back[k]
    out.reverse()
    return out


def _small_gap(a: list[int], b: list[int], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    if a1 - a0 > GAP_MAX or b1 - b0 > GAP_MAX:
        return []  # a long stretch with no line unique on both sides: left as replaced
    sm = difflib.SequenceMatcher(None, a[a0:a1], b[b0:b1], autojunk=False)
    return [(a0 + m.a + k, b0 + m.b + k) for m in sm.get_matching_blocks() for k in range(m.size)]


def _blocks(pairs: list[tuple[int, int]], na: int, nb: int) -> list[Block]:
    out: list[Block] = []
    pa = pb = 0

    def gap(i: int, j: int) -> None:
        if i > pa and j > pb:
            out.append(Block("replace", pa, i, pb, j))
        elif i > pa:
            out.append(Block("delete", pa, i, pb, pb))
        elif j > pb:
            out.append(Block("insert", pa, pa, pb, j))

    for i, j in pairs:
        if i != pa or j != pb:
            gap(i, j)
        if out and out[-1].tag == "equal" and out[-1].a1 == i and out[-1].b1 == j:
            out[-1] = out[-1]._replace(a1=i + 1, b1=j + 1)
        else:
            out.append(Block("equal", i, i + 1, j, j + 1))
        pa, pb = i + 1, j + 1
    gap(na, nb)
    return out
