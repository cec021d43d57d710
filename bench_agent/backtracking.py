"""Inputs that make a regular expression backtrack, to refuse a pattern before it is used (``patterns.check``).

A backtracking engine is slow on a pattern when a repetition's body can match
the same text in more than one way (``(a|aa)+``, ``(\\w+\\s?)+``, ``(\\d+)*``)
and what follows the repetition then fails: every way of splitting the text
is tried. So for each repetition of the pattern (as Python's ``re`` parses
it), ``pumps`` makes the text that leads to it (an example of what comes
before) and a few examples of its body; ``slow_input`` repeats each example to
``PROBE_CHARS`` characters, ends it with a character nothing expects, and
searches it with a time limit. An exponential or cubic pattern runs out of
time there (seconds against the limit's half second); a sane one needs
microseconds, a quadratic one a few milliseconds (that one is left to the
matching budget at run time).

The examples are a best effort (a class gives one member, a back-reference
nothing): a pattern that gets past the probes is still bounded when it runs.
"""

from __future__ import annotations

import time
from re import _constants as c

PROBE_CHARS = 1000  # long enough for a cubic pattern to take seconds, short enough for a quadratic one to take ms
MAX_PROBES = 64
ENDINGS = ("\x00", "")  # a character no pattern of a log expects, or the end of the text
_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT)
_CANDIDATES = "a1 A_-.:/=,;x\t\x00"  # tried in order for a class's member (or, negated, a non-member)
_CATEGORIES = {
    c.CATEGORY_DIGIT: str.isdigit, c.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
    c.CATEGORY_SPACE: str.isspace, c.CATEGORY_LINEBREAK: lambda ch: ch == "\n",
}
_NEGATED = {c.CATEGORY_NOT_DIGIT: c.CATEGORY_DIGIT, c.CATEGORY_NOT_WORD: c.CATEGORY_WORD,
            c.CATEGORY_NOT_SPACE: c.CATEGORY_SPACE, c.CATEGORY_NOT_LINEBREAK: c.CATEGORY_LINEBREAK}


def slow_input(tree, compiled, probe_s: float, total_s: float) -> str | None:
    """The first probe input on which ``compiled`` (the pattern ``tree`` was parsed from) searches for longer than
    ``probe_s``, or the one that takes all probes past ``total_s`` (both CPU time), or None."""
    tried: set[str] = set()
    spent = -time.thread_time()
    for prefix, body in pumps(list(tree)):
        for ending in ENDINGS:
            text = prefix + body * max(1, PROBE_CHARS // len(body)) + ending
            if text in tried:
                continue
            tried.add(text)
            if len(tried) > MAX_PROBES:
                return None
            try:  # the limit is CPU time (regex's own clock): a busy machine does not make a pattern slow
                compiled.search(text, concurrent=True, timeout=probe_s)
            except TimeoutError:
                return text
            if spent + time.thread_time() > total_s:
                return text
    return None


def pumps(seq: list, prefix: str = ""):
    """(text before, example of the body) of each repetition in ``seq`` that may repeat more than once."""
    for i, (op, av) in enumerate(seq):
        before = prefix + examples(seq[:i], 1)[0]
        if op in _REPEATS and av[1] > 1:
            for body in examples(list(av[2])):
                if body:
                    yield before, body
            yield from pumps(list(av[2]), before)
        elif op is c.SUBPATTERN:
            yield from pumps(list(av[3]), before)
        elif op is c.BRANCH:
            for branch in av[1]:
                yield from pumps(list(branch), before)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            yield from pumps(list(av[1]), before)
        # an atomic group or a possessive repetition never gives back what it matched: nothing to pump


def examples(seq: list, most: int = 4) -> list[str]:
    """Up to ``most`` short strings that ``seq`` matches (a best effort; see the module's docstring)."""
    out = [""]
    for op, av in seq:
        out = [(head + tail)[:PROBE_CHARS] for head in out for tail in _item(op, av, most)][:most]
    return out


def _item(op, av, most: int) -> list[str]:
    if op is c.LITERAL:
        return [chr(av)]
    if op is c.NOT_LITERAL:
        return ["b" if av == ord("a") else "a"]
    if op is c.ANY:
        return ["a"]
    if op is c.IN:
        return [_member(av)]
    if op is c.BRANCH:
        return [e for branch in av[1] for e in examples(list(branch), most)][:most]
    if op is c.SUBPATTERN:
        return examples(list(av[3]), most)
    if op is c.ATOMIC_GROUP:
        return examples(list(av), most)
    if op in _REPEATS or op is c.POSSESSIVE_REPEAT:
        least = av[0]  # at most what a probe holds: a{60000}{60000} must not make a 3.6 GB example
        return [e * min(least, PROBE_CHARS // max(len(e), 1) + 1) for e in examples(list(av[2]), most)] if least else [""]
    return [""]  # anchors, look-arounds, back-references: nothing of their own


def _member(items: list) -> str:
    """A character of the class ``items`` (``[...]``), or one outside it when the class is negated."""
    negated = bool(items) and items[0][0] is c.NEGATE
    if not negated:
        for op, av in items:
            if op is c.LITERAL:
                return chr(av)
            if op is c.RANGE:
                return chr(av[0])
    return next((ch for ch in _CANDIDATES if _inside(items, ch) != negated), "a")


def _inside(items: list, ch: str) -> bool:
    o = ord(ch)
    for op, av in items:
        if (op is c.LITERAL and av == o) or (op is c.RANGE and av[0] <= o <= av[1]):
            return True
        if op is c.CATEGORY:
            if av in _CATEGORIES and _CATEGORIES[av](ch):
                return True
            if av in _NEGATED and not _CATEGORIES[_NEGATED[av]](ch):
                return True
    return False
