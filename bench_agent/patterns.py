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

The syntax is Python's ``re`` syntax (``regex``'s VERSION0 is compatible).
"""

from __future__ import annotations

from functools import lru_cache
TYPE_CHECKING = False  # a capture need not import typing (docs/scale.md: every supervisor pays for it)
if TYPE_CHECKING:
    from typing import Any

from bench_agent.errors import UsageError

MATCH_BUDGET_S = 2.0  # one search over at most 1 MiB: a sane pattern needs milliseconds


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
    rx = _regex()
    try:
        return rx.compile(pattern, rx.MULTILINE if multiline else 0)
    except (rx.error, ValueError, OverflowError, RecursionError) as exc:
        shown = pattern.decode("utf-8", "replace") if isinstance(pattern, bytes) else pattern
        raise UsageError(f"invalid regular expression {shown!r}: {exc}", pattern=shown) from exc


def search(compiled, data: Any, pos: int = 0, budget_s: float = MATCH_BUDGET_S):
    """``compiled.search(data, pos)``, bounded by ``budget_s`` and without holding the GIL."""
    try:
        return compiled.search(data, pos, concurrent=True, timeout=budget_s)
    except TimeoutError:
        shown = compiled.pattern.decode("utf-8", "replace") if isinstance(compiled.pattern, bytes) else compiled.pattern
        raise PatternTooSlow(
            f"the regular expression {shown!r} took more than {budget_s:g} s on an input of length {len(data)} "
            "(it backtracks catastrophically)",
            hint="avoid nested repetition such as (a+)* or (x|x)*; match a literal prefix first",
            pattern=shown) from None


def find(pattern: str, text: str, multiline: bool = True):
    """Search ``text`` for ``pattern`` (a job step's expectation): compiled once, bounded, GIL released."""
    return search(compile_text(pattern, multiline), text)
