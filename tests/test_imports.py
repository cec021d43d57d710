"""The import graph of the house, read with ``ast`` (imports at module level and inside functions).

- No import circles anywhere in the house: ``bench_agent``, ``controller`` and ``scenarios``,
  each on its own and all together.
- The one import rule: ``bench_agent`` never imports ``controller`` or ``scenarios``;
  ``controller`` never imports ``scenarios``.
- No back-arrows in ``controller``: its layers, lowest first, are (``LAYERS``)

    lab         controller (the package), controller.paths, controller.lab: the lab file, the name grammar
    state       controller.backends, controller.keys: where job state lives (results database, leases, broker)
                and this machine's signing keys, from the
                environment
    transports  controller.transport, controller.transports: how an operation reaches a host
    dispatch    controller.dispatch, controller.power: the one road to a transport
    jobs        controller.jobs: job files, running, queueing, following, reports, operator overrides
    front ends  controller.mcp, controller.dashboard, controller.api, controller.plugin, controller.provision
    cli         controller.cli

  A module imports modules of its own layer or lower ones, never a higher one: a transport never
  reaches into jobs, the dispatcher never into jobs, the MCP server never into the CLI; a fact two
  layers share lives in the lower one. One exception, written out edge by edge in ``UPWARD``: a
  job's steps *are* panio command lines, so ``controller.jobs.spec`` compiles them against the
  CLI's own parser and command table and plans them through the CLI's runtime, rather than keep a
  second grammar that could drift from the one people type.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Circles not yet broken, each as the sorted tuple of its modules. Empty: the house has none.
ALLOWED: set[tuple[str, ...]] = set()
HOUSE = ("bench_agent", "controller", "scenarios")

# controller's layers, lowest first; a module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("controller", "controller.paths", "controller.lab"),
    ("controller.backends", "controller.keys"),
    ("controller.transport", "controller.transports"),
    ("controller.dispatch", "controller.power"),
    ("controller.jobs",),
    ("controller.mcp", "controller.dashboard", "controller.api", "controller.plugin", "controller.provision"),
    ("controller.cli",),
)
# The only imports that go up a layer: job steps are CLI command lines (see the docstring).
UPWARD: set[tuple[str, str]] = {
    ("controller.jobs.spec", "controller.cli.commands"),  # a step names a command that exists
    ("controller.jobs.spec", "controller.cli.main"),  # build_parser: a step's flags, bounds included
    ("controller.jobs.spec", "controller.cli.runtime"),  # a step planned as the CLI plans the command
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules ``path`` imports: ``from a.b import c`` counts as ``a.b.c`` when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
    return found


def graph(*packages: str) -> dict[str, set[str]]:
    mods = {name: path for package in packages for name, path in modules(package).items()}
    known = set(mods)
    return {name: imported(path, name, known) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def circles_in(*packages: str) -> list[list[str]]:
    edges = graph(*packages)
    inside = {m: {t for t in ts if t in edges} for m, ts in edges.items()}
    return [c for c in cycles(inside) if tuple(c) not in ALLOWED]


@pytest.mark.parametrize("packages", [(p,) for p in HOUSE] + [HOUSE], ids=[*HOUSE, "house"])
def test_no_import_circles(packages):
    circles = circles_in(*packages)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_one_import_rule():
    def crossing(package: str, forbidden: tuple[str, ...]) -> list[str]:
        return sorted(f"{m} imports {t}" for m, ts in graph(package).items() for t in ts
                      if t.split(".")[0] in forbidden)

    assert crossing("bench_agent", ("controller", "scenarios")) == []
    assert crossing("controller", ("scenarios",)) == []


def layer(module: str) -> int | None:
    """The index in ``LAYERS`` of ``module``'s longest matching prefix (None: no layer names it)."""
    best: tuple[int, int] | None = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix == "controller"  # the package itself, not everything under it
            if module == prefix or (not exact and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix))
    return None if best is None else best[0]


def test_every_controller_module_has_a_layer():
    assert [m for m in modules("controller") if layer(m) is None] == [], "add it to LAYERS in tests/test_imports.py"


def test_controller_has_no_back_arrows():
    back = sorted(f"{m} imports {t}" for m, ts in graph("controller").items() for t in ts
                  if t.startswith("controller") and layer(t) is not None and layer(m) is not None
                  and layer(t) > layer(m) and (m, t) not in UPWARD)
    assert back == [], "lower layers import higher ones (see LAYERS):\n" + "\n".join(back)


def test_the_exceptions_are_still_needed():
    edges = graph("controller")
    assert [(m, t) for m, t in sorted(UPWARD) if t not in edges.get(m, ())] == []


def test_the_checker_sees_what_it_must():
    """The rules above pass vacuously if the graph misses imports: these edges exist and are found."""
    edges = graph("controller")
    assert "controller.backends" in edges["controller.dispatch"]  # inside a method
    assert "controller.cli.main" in edges["controller.jobs.spec"]  # inside a function
    assert layer("controller.cli.main") > layer("controller.jobs.spec") > layer("controller.transports.celery")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_test_module_imports_another_test_module():
    """Shared test helpers live in helper modules (``peerhelp``, ``simbench``, ``clihelp``, ...), never in a
    ``test_*`` module another test module imports (issue 26): moving or deleting a test must not break others."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if n.rsplit(".", 1)[-1].startswith("test_")]
    assert not offenders, "test modules imported by others:\n" + "\n".join(offenders)
