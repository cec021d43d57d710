"""Regular expressions from users, agents and job files, matched with a time bound.

A pattern comes from outside (``serial wait --pattern``, ``transact --until``,
a job step's ``expect_output``), so it may backtrack catastrophically:
``(\\d+)*$`` against a long line of digits takes longer than the universe
under Python's ``re``, holding the GIL, and a capture daemon matching it would
stop capturing. panio matches with the ``regex`` package instead, which

- releases the GIL while it matches (``concurrent=True``), so capture threads
  and the control socket keep running whatever a matcher does, and
- takes a ``timeout``: a search that runs past ``MATCH_BUDGET_S`` raises
  ``PatternTooSlow`` (a usage error: the pattern must change) instead of
  burning a core until the wait's own deadline.

The syntax is Python's ``re`` syntax (``regex``'s VERSION0 is compatible), and only that: a pattern is
parsed by ``re`` first, so the ``regex`` package's own additions are refused, ``(?R)`` among them (a recursive
pattern that fills half a gigabyte before ``regex`` gives up). A pattern longer than ``MAX_CHARS`` or nested
deeper than ``MAX_DEPTH`` is refused before any parser sees it (a parser recurses once a level).

A pattern read from a file (a job file's ``expect_output``, ``capture``, ``[triage] ignore``; a lab profile's
cue) is ``check``-ed when the file is loaded: besides the above, it is tried on inputs made to make it
backtrack (``bench_agent.backtracking``), and refused if one of them takes more than ``PROBE_S``. That
refuses the exponential and high-degree patterns (``(a|aa)+b``, ``(\\w+\\s?)+$``) with the key named, before
anything runs; what gets past it (a merely quadratic pattern on a long log) still meets ``MATCH_BUDGET_S``.
"""

from __future__ import annotations

import re
from functools import lru_cache

TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any

from bench_agent.errors import UsageError

MATCH_BUDGET_S = 2.0  # one search over at most 1 MiB: a sane pattern needs milliseconds
MAX_CHARS = 4096  # a pattern in a job file, a lab file or on a command line
MAX_DEPTH = 64  # groups inside groups
MAX_UNROLLED = 100_000  # items once counted repetitions are written out: regex unrolls (ab{1000}){1000} to 263 MB
PROBE_S = 0.5  # one probe of ``check`` (1,000 characters): a sane or quadratic pattern needs < 0.05 s
PROBES_S = 1.0  # all the probes of one pattern (at most 64): a sane one needs a few ms
FILE_PROBES_S = 3.0  # all the probes of one file's patterns (``probing``): a sane job file needs well under 0.1 s


class PatternTooSlow(UsageError):
    """A pattern that backtracks past the matching budget."""


def _regex():
    import regex

    return regex


@lru_cache(maxsize=256)
def compile_text(pattern: str, multiline: bool = False):
    """``pattern`` compiled for ``str`` input, or a ``UsageError`` saying why it is not a regular expression."""
    return _compile(pattern, multiline)


@lru_cache(maxsize=256)
def compile_bytes(pattern: str):
    """``pattern`` compiled for ``bytes`` input (a serial interface's received bytes). A pattern with no
    metacharacter (a prompt, ``ok 42``) is searched as the literal it is (``Literal``)."""
    if _META.isdisjoint(pattern):
        return Literal(pattern.encode("utf-8"))
    return _compile(pattern.encode("utf-8"), False)


_META = frozenset(".^$*+?{}[]\\|()")  # what makes a pattern more than its literal text (no flags are set)


class Literal:
    """A pattern without metacharacters, searched with ``bytes.find``: the same matches as the compiled
    regex, without its compile (0.1-0.4 ms a new pattern here, in every `serial transact` with its own
    ``--until``) and with nothing that could backtrack. Answers ``search`` as a compiled pattern does."""

    __slots__ = ("pattern",)

    def __init__(self, pattern: bytes) -> None:
        self.pattern = pattern

    def search(self, data: Any, pos: int = 0, **_bounds: Any) -> LiteralMatch | None:
        at = data.find(self.pattern, pos)
        return None if at < 0 else LiteralMatch(bytes(self.pattern), at)


class LiteralMatch:
    """The match of a ``Literal``: ``start``, ``end``, ``group()`` and no groups."""

    __slots__ = ("text", "at")

    def __init__(self, text: bytes, at: int) -> None:
        self.text, self.at = text, at

    def start(self) -> int:
        return self.at

    def end(self) -> int:
        return self.at + len(self.text)

    def group(self, index: int = 0) -> bytes:
        if index != 0:
            raise IndexError("no such group")
        return self.text

    def groups(self) -> tuple:
        return ()


def _compile(pattern: str | bytes, multiline: bool):
    shown = pattern.decode("utf-8", "replace") if isinstance(pattern, bytes) else pattern
    parse(shown)
    rx = _regex()
    try:
        return rx.compile(pattern, rx.MULTILINE if multiline else 0)
    except (rx.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise UsageError(f"invalid regular expression {_short(shown)}: {exc}", pattern=_short(shown, 200)) from exc


@lru_cache(maxsize=64)
def compile_fuzzy(pattern: str, max_distance: int):
    """``pattern`` (refused as ``compile_text`` refuses) matched with up to ``max_distance`` edits, the fewest
    first (``regex``'s fuzzy matching): how ``video wait`` reads through OCR's mistakes. The wrapper is panio's,
    the only pattern outside ``re``'s syntax that is compiled."""
    compile_text(pattern, True)
    rx = _regex()
    try:
        return rx.compile(f"(?b)(?:{pattern}){{e<={int(max_distance)}}}", rx.MULTILINE)
    except (rx.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise UsageError(f"invalid regular expression {_short(pattern)} with fuzzy matching: {exc}",
                         pattern=_short(pattern, 200)) from exc


# What nests: a group's parenthesis outside a character class (an escaped character and a class are skipped whole).
_NESTING = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|[()]", re.S)


def parse(pattern: str):
    """``pattern`` parsed by Python's ``re`` (its syntax tree), or a ``UsageError`` saying why it is refused:
    too long, nested too deep, or not ``re`` syntax (a recursive ``(?R)`` is not)."""
    depth = deepest = 0
    for m in _NESTING.finditer(pattern):
        depth += {"(": 1, ")": -1}.get(m.group(), 0)
        deepest = max(deepest, depth)
    if deepest > MAX_DEPTH:
        raise UsageError(f"the regular expression {_short(pattern)} nests groups {deepest} deep: at most {MAX_DEPTH}",
                         pattern=_short(pattern, 200))
    if len(pattern) > MAX_CHARS:
        raise UsageError(f"the regular expression {_short(pattern)} is {len(pattern)} characters long: "
                         f"at most {MAX_CHARS}", pattern=_short(pattern, 200))
    import warnings  # only here: a capture supervisor that compiles no pattern never loads it

    try:
        with warnings.catch_warnings():  # re's FutureWarning on "[[" would be a third line on stderr
            warnings.simplefilter("ignore")
            tree = re._parser.parse(pattern)
    except (re.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        why = "a recursive pattern" if re.search(r"unknown extension \?(?:R|&|P>|[+-]?\d)", str(exc)) else exc
        raise UsageError(f"invalid regular expression {_short(pattern)}: {why} (panio takes Python's re syntax)",
                         pattern=_short(pattern, 200)) from None
    size = _unrolled(tree)
    if size > MAX_UNROLLED:
        raise UsageError(f"the regular expression {_short(pattern)} repeats to {size:,} items: at most "
                         f"{MAX_UNROLLED:,} regex writes them out as it compiles: (a{{60000}}){{60000}} filled the memory",
                         pattern=_short(pattern, 200))
    return tree


def _unrolled(seq) -> int:
    """How many items ``seq`` (an ``re`` parse) has once each repetition's least count is written out."""
    from re import _constants as c

    total = 0
    for op, av in seq:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            total += max(av[0], 1) * _unrolled(av[2])
        elif op is c.SUBPATTERN:
            total += _unrolled(av[3])
        elif op is c.BRANCH:
            total += sum(_unrolled(branch) for branch in av[1])
        elif op in (c.ASSERT, c.ASSERT_NOT):
            total += _unrolled(av[1])
        elif op is c.ATOMIC_GROUP:
            total += _unrolled(av)
        else:
            total += 1
        if total > MAX_UNROLLED:
            return total
    return total


def _short(pattern: str, most: int = 60) -> str:
    """``pattern`` as a message shows it: quoted, cut after ``most`` characters."""
    return repr(pattern) if len(pattern) <= most else repr(pattern[:most]) + f"... ({len(pattern)} characters)"


class probing:
    """``with patterns.probing("job file ci.toml"):``: every ``check`` inside shares ``FILE_PROBES_S`` of CPU for
    its probes. One pattern's probes are bounded by ``PROBES_S``; a file holds many, and a job file comes from a
    token holder through the controller's API: without a bound for the whole file, a thousand patterns that each
    just pass would cost the controller a thousand seconds of CPU to check. A pattern already passed in this
    process costs nothing again. (A class, not contextlib: captures import this module at start-up.)"""

    def __init__(self, what: str, seconds: float = FILE_PROBES_S) -> None:
        self.what, self.seconds, self.left = what, seconds, seconds

    def __enter__(self) -> probing:
        self._token = _PROBING.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _PROBING.reset(self._token)

    def spent(self) -> UsageError:
        return PatternTooSlow(f"the regular expressions of {self.what} take more than {self.seconds:g} s of CPU to "
                              "check in all", hint="use fewer or simpler patterns (a literal prefix, no nested "
                              "repetition)")


def _probing_var():
    from contextvars import ContextVar

    return ContextVar("panio_pattern_probing", default=None)


_PROBING = _probing_var()
_PASSED: set[tuple[str, bool]] = set()  # patterns whose probes passed in this process (bounded below)


def check(pattern: str, multiline: bool = True):
    """``pattern`` compiled for ``str`` input once it has passed the probes of ``bench_agent.backtracking``;
    else a ``UsageError`` (``PatternTooSlow`` when a probe ran out of time, or the file's ``probing`` budget
    did) that says why."""
    import time

    from bench_agent import backtracking

    compiled = compile_text(pattern, multiline)
    if (pattern, multiline) in _PASSED:
        return compiled
    budget = _PROBING.get()
    if budget is not None and budget.left <= 0:
        raise budget.spent()
    total = PROBES_S if budget is None else min(PROBES_S, budget.left)
    began = time.thread_time()
    slow = backtracking.slow_input(parse(pattern), compiled, PROBE_S, total)
    if budget is not None:
        budget.left -= time.thread_time() - began
        if slow is not None and total < PROBES_S and budget.left <= 0:
            raise budget.spent()  # the file's budget ran out, not this pattern's own
    if slow is None:
        if len(_PASSED) >= 4096:
            _PASSED.clear()
        _PASSED.add((pattern, multiline))
    if slow is not None:
        raise PatternTooSlow(
            f"the regular expression {_short(pattern)} backtracks catastrophically (over {PROBE_S:g} s on a text of "
            f"{len(slow)} characters such as {slow[:12]!r}...)",
            hint="avoid a repetition whose body can match the same text in two ways, such as (a|aa)+ or (\\w+\\s?)+",
            pattern=_short(pattern, 200))
    return compiled


def search(compiled, data: Any, pos: int = 0, budget_s: float = MATCH_BUDGET_S):
    """``compiled.search(data, pos)``, bounded by ``budget_s`` and without holding the GIL."""
    try:
        return compiled.search(data, pos, concurrent=True, timeout=budget_s)
    except TimeoutError:
        raise _too_slow(compiled, budget_s, len(data)) from None


def _too_slow(compiled, budget_s: float, length: int) -> PatternTooSlow:
    shown = compiled.pattern.decode("utf-8", "replace") if isinstance(compiled.pattern, bytes) else compiled.pattern
    return PatternTooSlow(
        f"the regular expression {_short(shown)} took more than {budget_s:g} s on an input of length {length} "
        "(it backtracks catastrophically)",
        hint="avoid nested repetition such as (a+)* or (x|x)*; match a literal prefix first",
        pattern=_short(shown, 200))


def sub(compiled, repl: str, text: str, budget_s: float = MATCH_BUDGET_S) -> str:
    """``compiled.sub(repl, text)``, bounded by ``budget_s`` in all and without holding the GIL."""
    try:
        return compiled.sub(repl, text, concurrent=True, timeout=budget_s)
    except TimeoutError:
        raise _too_slow(compiled, budget_s, len(text)) from None


def find(pattern: str, text: str, multiline: bool = True):
    """Search ``text`` for ``pattern`` (a job step's expectation): compiled once, bounded, GIL released."""
    return search(compile_text(pattern, multiline), text)
