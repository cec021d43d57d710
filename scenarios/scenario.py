"""Scenario fixtures: load ``catalog/*.toml`` into plain dataclasses.

A scenario is {id, goal, tier, conditions, reference, traps, grader, fixture,
bad variants, loopback}. The field reference is docs/evals.md; the seed's
catalog (C1–C8, R1–R10, s1–s11, M1–M5) is the source of truth for content.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from scenarios.surface import CATALOG

CONDITIONS = ("cold", "warm", "preloaded")  # the CLI conditions (seed §2.1)
MCP = "mcp"  # the agent gets `panio mcp` instead of the CLI (seed's MCP page); a scenario opts in with `mcp = true`
ALL_CONDITIONS = (*CONDITIONS, MCP)
TIERS = ("t0", "t1")


class CatalogError(Exception):
    """A scenario file is missing a field or has a wrong one."""


class EvalUsage(Exception):
    """A panio-eval command line that cannot run (exit 2); here so every command module can raise it."""


class Interrupted(Exception):
    """panio-eval was stopped (SIGTERM, SIGINT) during a run: every agent was stopped, the trials that were
    running are recorded as ``interrupted`` and run.json's state says so; ``--resume`` runs them again.
    panio-eval exits 128 + the signal's number."""

    def __init__(self, signum: int, path, trials: list[str]) -> None:
        import signal

        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum, self.path, self.trials = int(signum), path, trials


@dataclass
class Step:
    cmd: str
    tier: str = "t1"  # t1: runnable in a config-only sandbox; t0: stated only
    optional: bool = False
    alt: list[str] = field(default_factory=list)
    expect_exit: int | list[int] = 0
    match: str = ""  # a looser pattern for matching stated commands (re: values, placeholders)
    group: str = ""  # consecutive steps with the same group may come in any order among themselves

    @property
    def argv(self) -> list[str]:
        return panio_argv(self.cmd)

    def patterns(self) -> list[list[str]]:
        return [panio_argv(c) for c in [self.match or self.cmd, *self.alt]]

    def exit_ok(self, status: int) -> bool:
        allowed = self.expect_exit if isinstance(self.expect_exit, list) else [self.expect_exit]
        return status in allowed


@dataclass
class Trap:
    id: str
    text: str
    central: bool = False
    check: dict | None = None


@dataclass
class Bad:
    id: str
    why: str
    commands: list[str] = field(default_factory=list)
    answer: str = ""


@dataclass
class Scenario:
    id: str
    title: str
    goal: str
    tier: str
    group: str
    core: bool
    conditions: list[str]
    tags: list[str]
    notes: str
    fixture_lab: str | None
    reference: list[Step]
    reference_prose: str
    traps: list[Trap]
    grader: dict
    bad: list[Bad]
    loopback: dict | None
    path: Path
    hardware: dict | None = None

    @property
    def central_traps(self) -> list[Trap]:
        return [t for t in self.traps if t.central]

    def reference_text(self) -> str:
        lines = [s.cmd + ("   # optional" if s.optional else "") + (f"   # or: {' | '.join(s.alt)}" if s.alt else "")
                 for s in self.reference]
        if self.reference_prose:
            lines.append(self.reference_prose.strip())
        return "\n".join(lines)


def panio_argv(cmd: str) -> list[str]:
    """``"panio a b"`` -> ``["a", "b"]`` (shell quoting honoured, no shell)."""
    toks = shlex.split(cmd)
    if not toks or toks[0] != "panio":
        raise CatalogError(f"reference command must start with `panio`: {cmd!r}")
    return toks[1:]


def load(path: Path) -> Scenario:
    with open(path, "rb") as f:
        d = tomllib.load(f)
    try:
        sc = Scenario(
            id=d["id"], title=d["title"], goal=d["goal"].strip(), tier=d["tier"], group=d["group"],
            core=d.get("core", False), conditions=d.get("conditions", list(CONDITIONS)) + ([MCP] if d.get("mcp") else []),
            tags=d.get("tags", []),
            notes=d.get("notes", ""), fixture_lab=_fixture_lab(path, d.get("fixture", {})),
            reference=[Step(**s) for s in d.get("reference", [])], reference_prose=d.get("reference_prose", ""),
            traps=[Trap(**t) for t in d.get("trap", [])], grader=d.get("grader", {}),
            bad=[Bad(**b) for b in d.get("bad", [])], loopback=d.get("loopback"), path=path,
            hardware=d.get("hardware"),
        )
    except (KeyError, TypeError) as exc:
        raise CatalogError(f"{path.name}: {exc}") from None
    _validate(sc)
    return sc


def _fixture_lab(path: Path, fixture: dict) -> str | None:
    """The lab text a trial starts from (None: start from `panio init`)."""
    if "lab" in fixture:
        return fixture["lab"]
    if "lab_file" in fixture:
        return (path.parent / fixture["lab_file"]).read_text(encoding="utf-8")
    return None


def _validate(sc: Scenario) -> None:
    if MCP in sc.conditions and sc.tier != "t0":
        raise CatalogError(f"{sc.id}: the mcp condition is for runtime (t0) scenarios; panio mcp does not configure")
    if sc.tier not in TIERS:
        raise CatalogError(f"{sc.id}: tier must be one of {TIERS}")
    bad = [c for c in sc.conditions if c not in ALL_CONDITIONS]
    if bad:
        raise CatalogError(f"{sc.id}: unknown condition(s) {bad}")
    if not sc.bad:
        raise CatalogError(f"{sc.id}: needs at least one known-bad variant")
    if not sc.reference and not sc.reference_prose:
        raise CatalogError(f"{sc.id}: needs a reference")
    for s in sc.reference:
        s.argv  # noqa: B018 - raises CatalogError on a non-panio line
        for a in s.alt:
            panio_argv(a)


def load_all(catalog: Path = CATALOG) -> list[Scenario]:
    files = sorted(p for p in catalog.glob("*.toml") if not p.name.startswith("_"))
    return sorted((load(p) for p in files), key=lambda s: _order(s.id))


def _order(sid: str) -> tuple[int, int]:
    groups = {"C": 0, "R": 1, "s": 2, "M": 3}
    return groups.get(sid[0], 9), int(sid[1:]) if sid[1:].isdigit() else 0


def select(scenarios: list[Scenario], ids: list[str] | None) -> list[Scenario]:
    if not ids:
        return scenarios
    want = {i.lower() for i in ids}
    picked = [s for s in scenarios if s.id.lower() in want]
    unknown = want - {s.id.lower() for s in picked}
    if unknown:
        raise CatalogError(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    return picked
