"""The target as a role: bound once per answer, not a literal name.

References and trap patterns are written with the fixture's target name
(``pico``, ``dut``), but most goals never name it ("the Pi", "the console"):
an agent may call it ``rpi5``, ``<target>`` or ``$TARGET``. The first target an
answer names (in a target slot: ``-t``/``--target``, or a ``TARGET``
positional) binds the role, and every later use of that same name stands for
the fixture's target; a second, different name does not (capturing one board
and typing into another is a wrong answer). When the goal does name the target
("tell me whether pico is powered on"), only a placeholder may stand for it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from scenarios.evidence import Command
from scenarios.scenario import Scenario
from scenarios.surface import GLOBAL_VALUE_OPTS, Surface, _is_flag, _resolve_opt, parse

PLACEHOLDER = re.compile(r"^(?:<[^<>]+>|\$\{?\w+\}?|\{\w+\}|[A-Z][A-Z0-9_]*|…|\.\.\.)$")


def target_slot(surface: Surface, argv: list[str]) -> tuple[int, str] | None:
    """(index in argv, prefix) of the token that holds the target (prefix ``--target=`` when inline)."""
    p = parse(surface, argv, strict=False)
    if p.status in ("invented_command", "shorthand", "help") or not p.path:
        return None
    node = surface.find(p.path)
    i = 0
    while i < len(argv) and _is_flag(argv[i]):
        i += 2 if argv[i] in GLOBAL_VALUE_OPTS else 1
    i += len(p.path)
    names = [n.upper() for n, _ in node.positionals]
    want = names.index("TARGET") if "TARGET" in names else None
    seen = 0
    while i < len(argv):
        t = argv[i]
        if _is_flag(t):
            name, eq, _ = t.partition("=")
            opt = _resolve_opt(node, name)
            if opt is not None and node.canonical(opt) == "--target":
                return (i, name + "=") if eq else ((i + 1, "") if i + 1 < len(argv) else None)
            i += 2 if (opt is not None and node.options[opt].takes_value and not eq) else 1
            continue
        if want is not None and seen == want:
            return i, ""
        seen += 1
        i += 1
    return None


def role_of(sc: Scenario, surface: Surface) -> tuple[str | None, bool]:
    """(the fixture target the references use, whether the goal names it)."""
    names = set()
    for step in sc.reference:
        for pat in step.patterns():
            slot = target_slot(surface, pat)
            if slot:
                names.add(pat[slot[0]][len(slot[1]):])
    names = {n for n in names if not PLACEHOLDER.match(n)}
    if len(names) != 1:
        return None, False
    name = names.pop()
    return name, re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sc.goal) is not None


def bind(commands: list[Command], surface: Surface, role: str | None, fixed: bool) -> list[Command]:
    """The commands with the bound target name (or placeholder) written as the fixture's target."""
    if role is None:
        return commands
    bound: str | None = None
    out = []
    for c in commands:
        slot = None if c.rejected or c.is_help else target_slot(surface, c.argv)
        if slot is None:
            out.append(c)
            continue
        i, prefix = slot
        value = c.argv[i][len(prefix):]
        if bound is None:
            bound = value if (not fixed or PLACEHOLDER.match(value)) else role
        if value == bound and value != role:
            argv = list(c.argv)
            argv[i] = prefix + role
            c = replace(c, argv=argv)
        out.append(c)
    return out
