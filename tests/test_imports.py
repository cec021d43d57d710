"""The import graph of the house, read with ``ast`` (imports at module level and inside functions).

- No import circles between the modules of ``bench_agent``.
- The one import rule: ``bench_agent`` never imports ``controller`` or ``scenarios``;
  ``controller`` never imports ``scenarios``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Circles not yet broken, each as the sorted tuple of its modules. Empty: bench_agent has none.
ALLOWED: set[tuple[str, ...]] = set()


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


def test_bench_agent_has_no_import_circles():
    bench = graph("bench_agent")
    inside = {m: {t for t in ts if t in bench} for m, ts in bench.items()}
    circles = [c for c in cycles(inside) if tuple(c) not in ALLOWED]
    assert not circles, "import circles in bench_agent:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_one_import_rule():
    def crossing(package: str, forbidden: tuple[str, ...]) -> list[str]:
        return sorted(f"{m} imports {t}" for m, ts in graph(package).items() for t in ts
                      if t.split(".")[0] in forbidden)

    assert crossing("bench_agent", ("controller", "scenarios")) == []
    assert crossing("controller", ("scenarios",)) == []
