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

from bench_agent import patterns

GAP_MAX = 2000  # lines on each side that SequenceMatcher aligns between two anchors; beyond: replaced

# (pattern, placeholder): what always changes between two runs, in the order they apply. The serial log's own
# prefix goes first ("[12:00:01.234] #17 "). A pattern that starts with a fixed character is a pass of its own
# (the regex engine skips to that character); those that start a word are tried together, in one pass, only
# where a word starts with a character one of them can start with (a third of the work of trying everywhere).
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    (r"^\[\d\d:\d\d:\d\d(?:\.\d+)?\] (?:#\d+\*? )?", ""),
    (r"\[[ \t]*\d+\.\d+\]", "[<uptime>]"),
    (r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?", "<time>"),
    (r"\d\d:\d\d:\d\d(?:\.\d+)?\b", "<time>"),
    (r"1[5-9]\d{8}(?:\.\d+)?\b", "<epoch>"),
    (r"0x[0-9a-fA-F]+\b", "<hex>"),
    (r"(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b", "<hex>"),
    (r"\d+(?:\.\d+)? ?(?:ms|us|µs|ns|s|sec|secs|seconds)\b", "<dur>"),
    (r"(?:pid|PID|Pid)[ =:]+\d+", "pid <pid>"),
    (r"[Jj]ob[ _#:=-]*(?:id)?[ #:=]*\d+", "job <id>"),
    (r"\[(?<=[\w.-]\[)\d+\]", "[<pid>]"),  # "sshd[812]:", "modprobe[412]"
    (r"#\d+", "#<n>"),
)
_WORD_LED = DEFAULT_RULES[2:10]
_WORDS = re.compile(r"(?<![\w.])(?=[\da-fA-FpPJj])(?:" + "|".join(f"({p})" for p, _ in _WORD_LED) + ")", re.M)
_PLACEHOLDERS = ("",) + tuple(r for _, r in _WORD_LED)
_FIRST = [(re.compile(p, re.M), r) for p, r in DEFAULT_RULES[:2]]
_AFTER = [(re.compile(p, re.M), r) for p, r in DEFAULT_RULES[10:]]


class Rules:
    """The normalisation of one comparison: the defaults, then the job's ``[triage] ignore`` patterns (each match
    becomes ``<ignored>``). Each pass runs once over the whole log (one line a row), not once a line: a regex
    call costs more than its scan, and 100,000 lines must take well under a second."""

    def __init__(self, ignore: Iterable[str] = ()) -> None:
        # The job's own patterns: checked as `job check` checks them (a job recorded before it did, or a database
        # row, may hold a catastrophic one) and matched with a time bound, GIL released (bench_agent.patterns).
        self.ignore = [patterns.check(p) for p in ignore]

    def __call__(self, line: str) -> str:
        return self.text(line.rstrip("\r\n").replace("\n", " ")).rstrip(" ")

    def text(self, text: str) -> str:
        text = text.replace("\r", "")
        for pattern, repl in _FIRST:
            text = pattern.sub(repl, text)
        text = _WORDS.sub(lambda m: _PLACEHOLDERS[m.lastindex], text)
        for pattern, repl in _AFTER:
            text = pattern.sub(repl, text)
        for pattern in self.ignore:
            text = patterns.sub(pattern, "<ignored>", text)
        return text


_TRAILING = re.compile(r" +$", re.M)


def normalise(lines: list[str], rules: Rules | None = None) -> list[str]:
    """``lines`` (as ``splitlines`` gives them: no line end inside) normalised, in as many whole-text passes as
    there are rules."""
    rules = rules or Rules()
    if not lines:
        return []
    return _TRAILING.sub("", rules.text("\n".join(lines))).split("\n")


class Block(NamedTuple):
    """``a[a0:a1]`` against ``b[b0:b1]``: ``equal``, ``insert`` (only in b), ``delete`` (only in a), ``replace``."""

    tag: str
    a0: int
    a1: int
    b0: int
    b1: int


def align(a: list[str], b: list[str]) -> list[Block]:
    """The alignment of two (normalised) logs as blocks in order, covering both."""
    ids = {x: k for k, x in enumerate(dict.fromkeys(a + b))}
    ia, ib = list(map(ids.__getitem__, a)), list(map(ids.__getitem__, b))
    return _blocks(_matches(ia, ib, 0, len(ia), 0, len(ib)), len(ia), len(ib))


Run = tuple[int, int, int]  # a[i:i+n] == b[j:j+n]


def _common(a: list[int], b: list[int], i: int, j: int, most: int, step: int) -> int:
    """How many items agree from a[i], b[j] on (``step`` 1) or backwards from a[i-1], b[j-1] (``step`` -1), up to
    ``most``: slices compared in C, the length found by doubling then halving (no Python loop a line)."""
    def same(n: int) -> bool:
        return a[i:i + n] == b[j:j + n] if step == 1 else a[i - n:i] == b[j - n:j]

    lo, hi = 0, 1
    while hi <= most and same(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, most + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if same(mid) else (lo, mid)
    return lo


def _matches(a: list[int], b: list[int], a0: int, a1: int, b0: int, b1: int) -> list[Run]:
    """Matched runs, increasing in both."""
    n = _common(a, b, a0, b0, min(a1 - a0, b1 - b0), 1)
    head = [(a0, b0, n)] if n else []
    a0, b0 = a0 + n, b0 + n
    n = _common(a, b, a1, b1, min(a1 - a0, b1 - b0), -1)
    a1, b1 = a1 - n, b1 - n
    tail = [(a1, b1, n)] if n else []
    if a0 == a1 or b0 == b1:
        return head + tail
    anchors = _anchors(a, b, a0, a1, b0, b1)
    if not anchors:
        return head + _small_gap(a, b, a0, a1, b0, b1) + tail
    middle: list[Run] = []
    pa, pb = a0, b0
    for i, j in anchors:
        middle += _matches(a, b, pa, i, pb, j)
        middle.append((i, j, 1))
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


def _small_gap(a: list[int], b: list[int], a0: int, a1: int, b0: int, b1: int) -> list[Run]:
    if a1 - a0 > GAP_MAX or b1 - b0 > GAP_MAX:
        return []  # a long stretch with no line unique on both sides: left as replaced
    sm = difflib.SequenceMatcher(None, a[a0:a1], b[b0:b1], autojunk=False)
    return [(a0 + m.a, b0 + m.b, m.size) for m in sm.get_matching_blocks() if m.size]


def _blocks(runs: list[Run], na: int, nb: int) -> list[Block]:
    out: list[Block] = []
    pa = pb = 0
    for i, j, n in runs:
        if i > pa and j > pb:
            out.append(Block("replace", pa, i, pb, j))
        elif i > pa:
            out.append(Block("delete", pa, i, pb, pb))
        elif j > pb:
            out.append(Block("insert", pa, pa, pb, j))
        if out and out[-1].tag == "equal" and out[-1].a1 == i and out[-1].b1 == j:
            out[-1] = out[-1]._replace(a1=i + n, b1=j + n)
        else:
            out.append(Block("equal", i, i + n, j, j + n))
        pa, pb = i + n, j + n
    if na > pa and nb > pb:
        out.append(Block("replace", pa, na, pb, nb))
    elif na > pa:
        out.append(Block("delete", pa, na, pb, pb))
    elif nb > pb:
        out.append(Block("insert", pa, pa, pb, nb))
    return out
