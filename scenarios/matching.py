"""Matching stated commands against reference patterns, and trap predicates.

A pattern is a ``panio …`` line: ``<name>`` placeholders match any one value,
``re:REGEX`` values must match in full, a trailing ``*`` allows extra
positionals, and extra flags on the stated command are always allowed. Flags
are compared by their canonical long spelling (``-t`` == ``--target``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from scenarios.evidence import Command, Evidence
from scenarios.surface import Surface, parse

PLACEHOLDER = re.compile(r"^<[^<>]+>$")


def value_matches(pat: str | bool, val: str | bool) -> bool:
    if isinstance(pat, bool) or isinstance(val, bool):
        return pat == val or pat is True
    if PLACEHOLDER.match(pat):
        return True
    if pat.startswith("re:"):
        return re.fullmatch(pat[3:], val, re.S) is not None
    return _norm(pat) == _norm(val)


def _norm(v: str) -> str:
    for home in ("$HOME/", "${HOME}/"):
        if v.startswith(home):
            v = "~/" + v[len(home):]
    return v.rstrip("/") if len(v) > 1 else v


def pattern_argv(pattern: str | list[str]) -> list[str]:
    toks = shlex.split(pattern) if isinstance(pattern, str) else list(pattern)
    return toks[1:] if toks[:1] == ["panio"] else toks


def matches(surface: Surface, pattern: str | list[str], argv: list[str]) -> bool:
    pat = pattern_argv(pattern)
    star = bool(pat) and pat[-1] == "*"
    if star:
        pat = pat[:-1]
    pp = parse(surface, pat, strict=False)
    if pp.status == "invented_command":
        return _raw_prefix(pat, argv, star)
    sp = parse(surface, argv, strict=False)
    if sp.path != pp.path or sp.status == "invented_command":
        return False
    if pp.status == "invented_flag":  # a trap against a flag panio lacks (`setup --rust-only`): that flag, raw
        return _invented_flags(surface, pp.path, pat) <= _invented_flags(surface, sp.path, argv)
    for flag, val in pp.flags.items():
        if flag not in sp.flags or not value_matches(val, sp.flags[flag]):
            return False
    if len(sp.positionals) < len(pp.positionals):
        return False
    if not star and len(sp.positionals) > len(pp.positionals):
        return False
    return all(value_matches(p, v) for p, v in zip(pp.positionals, sp.positionals))


def _invented_flags(surface: Surface, path: tuple[str, ...], argv: list[str]) -> set[str]:
    from scenarios.surface import _resolve_opt

    node = surface.find(path)
    names = {t.split("=", 1)[0] for t in argv if t.startswith("-") and len(t) > 1}
    return {n for n in names if _resolve_opt(node, n) is None}


def _raw_prefix(pat: list[str], argv: list[str], star: bool) -> bool:
    if len(argv) < len(pat) or (not star and len(argv) != len(pat)):
        return False
    return all(value_matches(p, a) for p, a in zip(pat, argv))


def any_match(surface: Surface, patterns: list[str], argv: list[str]) -> bool:
    return any(matches(surface, p, argv) for p in patterns)


@dataclass
class TrapResult:
    id: str
    central: bool
    respected: bool | None  # None: not machine-checkable (the judge decides)
    evidence: str

    def to_json(self) -> dict:
        return {"id": self.id, "central": self.central, "respected": self.respected, "evidence": self.evidence}


def check_trap(surface: Surface, trap, ev: Evidence, lab: dict | None = None) -> TrapResult:
    c = trap.check
    if not c:
        return TrapResult(trap.id, trap.central, None, "judge-only trap")
    kind = c["kind"]
    cmds = [x for x in ev.acted if x.argv and parse(surface, x.argv, strict=False).status != "help"]
    fn = _KINDS.get(kind)
    if fn is None:
        raise ValueError(f"trap {trap.id}: unknown check kind {kind!r}")
    ok, why = fn(surface, c, cmds, ev, lab)
    return TrapResult(trap.id, trap.central, ok, why)


def _as_list(v) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def same_command(surface: Surface, pattern: str | list[str], argv: list[str]) -> bool:
    """``argv`` is the pattern's command, however badly formed: the same command path, and every literal
    positional of the pattern (the target) somewhere in ``argv``. ``serial send -t pico "uname -a"`` breaks the
    positional convention (another trap's business) but is still a send to pico."""
    if matches(surface, pattern, argv):
        return True
    pat = [t for t in pattern_argv(pattern) if t != "*"]
    pp, sp = parse(surface, pat, strict=False), parse(surface, argv, strict=False)
    if pp.status == "invented_command" or sp.status == "invented_command" or sp.path != pp.path:
        return False
    literal = [p for p in pp.positionals if isinstance(p, str) and not PLACEHOLDER.match(p) and not p.startswith("re:")]
    return all(v in argv for v in literal)


def _order(surface, c, cmds: list[Command], ev, lab):
    """Each ``then`` command only after one of ``first``: a ``then`` with no ``first`` at all walks into it too."""
    first, then = _as_list(c["first"]), _as_list(c["then"])
    seen_first = seen_then = False
    for cmd in cmds:
        is_then = any(same_command(surface, p, cmd.argv) for p in then)
        if is_then and not seen_first:
            return False, f"`{cmd.text}` before any of {first}"
        seen_then = seen_then or is_then
        if any(same_command(surface, p, cmd.argv) for p in first):
            seen_first = True
    return True, "order respected" if seen_then else f"none of {then}: nothing to order"


def _sequence(surface, c, cmds, ev, lab):
    want = _as_list(c["cmd"])
    i = 0
    for cmd in cmds:
        if i < len(want) and matches(surface, want[i], cmd.argv):
            i += 1
    return (i == len(want)), ("sequence present" if i == len(want) else f"missing `{want[i]}` in order")


def _forbid(surface, c, cmds, ev, lab):
    for cmd in cmds:
        if any_match(surface, _as_list(c["cmd"]), cmd.argv):
            return False, f"ran/stated `{cmd.text}`"
    return True, "no forbidden command"


def _require(surface, c, cmds, ev, lab):
    for cmd in cmds:
        if any_match(surface, _as_list(c["cmd"]), cmd.argv):
            return True, f"`{cmd.text}`"
    return False, f"none of {_as_list(c['cmd'])}"


def _convention(surface, c, cmds, ev, lab):
    for cmd in cmds:
        p = parse(surface, cmd.argv)
        if p.status == "convention":
            return False, f"`{cmd.text}`: {p.problem}"
    return True, "-t/positional convention respected"


def _forbid_shell(surface, c, cmds, ev, lab):
    rx = re.compile(c["regex"])
    for line in ev.programs:  # what runs: comments, output lines and prose are not shell
        if rx.search(line):
            return False, f"shell: `{line}`"
    return True, "no forbidden shell command"


def _require_text(surface, c, cmds, ev, lab):
    """The regex somewhere in the answer or its shell lines. With ``in_programs`` (a regex for what a command
    line writes, e.g. any kernel image name): when a line that runs names one, what runs decides, not the
    prose ("copy it as kernel_2712.img" above `cp out/kernel.img $ROOT/kernel8.img` walks into the trap)."""
    if c.get("in_programs"):
        lines = [x for x in ev.programs if re.search(c["in_programs"], x)]
        if lines:
            hit = next((x for x in lines if re.search(c["regex"], x)), None)
            return (hit is not None), (f"`{hit}`" if hit else f"`{lines[0]}` writes no /{c['regex']}/ (what runs decides)")
    m = re.search(c["regex"], ev.text + "\n" + "\n".join(ev.shell))
    return (m is not None), (f"says {m.group(0)!r}" if m else f"no /{c['regex']}/ in the answer")


def _affirm_text(surface, c, cmds, ev, lab):
    """The answer says the right thing (regex over its prose): respected. Silent or saying something else:
    the judge decides (a claim the regex cannot read, "configure writes the block into lab.toml", is never a pass)."""
    m = re.search(c["regex"], ev.text)
    return (True, f"says {m.group(0)!r}") if m else (None, f"no /{c['regex']}/ in the answer: the judge decides")


def _forbid_text(surface, c, cmds, ev, lab):
    m = re.search(c["regex"], ev.text)
    return (m is None), (f"says {m.group(0)!r}" if m else "clean")


def _lab(surface, c, cmds, ev, lab):
    if lab is None:
        return None, "no lab end state in this tier"
    from scenarios.labcheck import check_assert

    ok, why = check_assert(lab, c)
    return ok, why


def _logical_pointer(surface, c, cmds, ev, lab):
    """``hid send T moveabs X Y`` takes 0..32767 logical units. Both values inside a screen's pixel range
    (``pixels``, default 1920x1200) read as pixels: walked into, unless the answer shows they are logical:
    it states a screen size W x H and the pixel point (x*W/32767, y*H/32767) they were scaled from (small
    logical coordinates near the top left: respected), or calls them logical without that arithmetic (the
    judge's). A value beyond ``logical_above`` (default 4096) is logical. Anything between, or not a
    number, is the judge's."""
    px, py = c.get("pixels", [1920, 1200])
    above = int(c.get("logical_above", 4096))
    undecided = None
    for cmd in cmds:
        p = parse(surface, cmd.argv, strict=False)
        if p.path != ("hid", "send"):
            continue
        words = [str(v) for v in p.positionals]
        for i, w in enumerate(words[:-2]):
            if w != "moveabs":
                continue
            try:
                x, y = int(words[i + 1]), int(words[i + 2])
            except ValueError:
                undecided = undecided or f"`{cmd.text}`: coordinates not numbers"
                continue
            if 0 <= x <= px and 0 <= y <= py and (x, y) != (0, 0):
                scaled = _scaled_from(ev.text, x, y)
                if scaled:
                    continue
                if LOGICAL_SAID.search(ev.text):
                    undecided = undecided or (f"`{cmd.text}`: {x} {y} called logical, but no screen point the "
                                              "answer gives scales to them")
                    continue
                return False, f"`{cmd.text}`: {x} {y} are screen pixels; moveabs takes 0..32767 logical units"
            if max(x, y) <= above:
                undecided = undecided or f"`{cmd.text}`: {x} {y} could be pixels or logical units"
    if undecided:
        return None, undecided
    return True, "every moveabs in logical units (or none)"


LOGICAL_SAID = re.compile(r"\blogical\b|\b32767\b|\b32768\b", re.I)
RESOLUTION = re.compile(r"\b(\d{3,5})\s*[x×]\s*(\d{3,5})\b")
NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])")


def _scaled_from(text: str, x: int, y: int) -> str | None:
    """The screen size and pixel point (both stated in the text) that x, y are the logical form of."""
    nums = {round(float(n)) for n in NUMBER.findall(text)}
    for m in RESOLUTION.finditer(text):
        w, h = int(m.group(1)), int(m.group(2))
        ppx, ppy = x * w / 32767, y * h / 32767
        if any(abs(n - ppx) <= 1 for n in nums) and any(abs(n - ppy) <= 1 for n in nums):
            if (round(ppx), round(ppy)) != (x, y):
                return f"{w}x{h}"
    return None


_KINDS = {"order": _order, "sequence": _sequence, "forbid": _forbid, "require": _require,
          "convention": _convention, "forbid_shell": _forbid_shell, "require_text": _require_text,
          "forbid_text": _forbid_text, "affirm_text": _affirm_text, "lab": _lab,
          "logical_pointer": _logical_pointer}
