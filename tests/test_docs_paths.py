"""Every panio file and Python name the docs point to exists.

The docs send a reader to code: `bench_agent/jobs/intake.py`, `controller/cli/runtime.run_step`,
`bench_agent.leases.override`, `benchmarks/scale.py`. When a module moves or a function is renamed the
sentence still reads well and points nowhere (issue 41: the jobs/ packages moved under a dozen such
names). Paths are taken from the docs' text and README.md, code blocks included; a name with a placeholder
(`NAME`, `<scheme>`, `*`) is a pattern, not a file, and is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
TOPS = ("bench_agent", "controller", "benchmarks", "scripts", "tests", "ansible", "scenarios", "skills")
# a path starts at one of panio's top folders, not inside another path (`~/.ansible/cp`)
PATH = re.compile(r"(?<![\w./~-])((?:%s)/[\w./<>*-]*[\w>*])" % "|".join(TOPS))
DOTTED = re.compile(r"`((?:bench_agent|controller)(?:\.\w+)+)(?:\(\))?`")
PLACEHOLDER = re.compile(r"[<>*]|\b[A-Z]{2,}\b")


def named_paths(text: str) -> list[str]:
    return sorted({p.rstrip(".") for p in PATH.findall(text) if not PLACEHOLDER.search(p)})


def defines(source: str, name: str) -> bool:
    """Whether a module's text defines ``name``: a def, a class, an assignment or an import of it."""
    n = re.escape(name)
    return re.search(rf"^\s*(?:async\s+def|def|class)\s+{n}\b|^\s*{n}\s*[:=]|^\s*(?:from\s+\S+\s+)?import\b.*\b{n}\b",
                     source, re.M) is not None


def resolve_path(path: str) -> str | None:
    """Why ``path`` (a file or folder, or ``module/file.name`` for a name in ``module/file.py``) names nothing."""
    if (ROOT / path).exists():
        return None
    stem, _, name = path.rpartition(".")
    module = ROOT / f"{stem}.py"
    if stem and module.is_file():
        return None if defines(module.read_text(), name) else f"{module.relative_to(ROOT)} defines no {name!r}"
    return "no such file or folder"


def resolve_dotted(dotted: str) -> str | None:
    """Why ``dotted`` (a module, or a module's name and attributes) names nothing; found by files, not imports."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            break
    else:
        return "no such module"
    source = module.read_text()
    for name in parts[i:]:  # an attribute, then perhaps a method of it
        if not defines(source, name):
            return f"{module.relative_to(ROOT)} defines no {name!r}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=[p.name for p in DOCS])
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    text = doc.read_text()
    broken = {p: why for p in named_paths(text) if (why := resolve_path(p))}
    broken |= {d: why for d in sorted(set(DOTTED.findall(text))) if (why := resolve_dotted(d))}
    assert not broken, f"{doc.name} points to code that is not there: {broken}"


# Variables the docs make up for an example (a lab file's `webhook_env = "PANIO_TEAMS_URL"`): the user names them.
EXAMPLE_VARIABLES = {"PANIO_TEAMS_URL", "PANIO_SMTP_PASSWORD"}
CODE = [ROOT / d for d in ("bench_agent", "controller", "benchmarks", "scripts", "scenarios", "tests", "ansible")]


def test_every_variable_the_docs_name_is_read_by_panio() -> None:
    """A `PANIO_...` variable a page tells the reader to set is one some code of panio's reads (or sets)."""
    def variables(text: str) -> set[str]:
        return set(re.findall(r"\bPANIO_[A-Z0-9_]*[A-Z0-9]\b", text))

    named = {v for doc in DOCS for v in variables(doc.read_text())}
    files = [f for top in CODE for f in top.rglob("*")
             if f.suffix in (".py", ".yml", ".j2", ".cfg") and "__pycache__" not in f.parts] + [ROOT / "Makefile"]
    read = {v for f in files for v in variables(f.read_text(errors="replace"))}
    assert sorted(named - EXAMPLE_VARIABLES - read) == []


def test_a_moved_module_is_caught() -> None:
    """The check itself: a name that moved fails, the forms the docs use pass."""
    assert resolve_path("bench_agent/jobs/results_db.py") == "no such file or folder"
    assert resolve_path("bench_agent/jobs/steps.execute") is None
    assert "defines no 'no_such_step'" in resolve_path("bench_agent/jobs/steps.no_such_step")
    assert resolve_dotted("bench_agent.leases.override") is None
    assert resolve_dotted("bench_agent.jobs.celery_app.for_host") is None
    assert resolve_dotted("bench_agent.jobs.worker.take_job") == "bench_agent/jobs/worker.py defines no 'take_job'"
    assert resolve_dotted("bench_agent.jobs.results_db") == "bench_agent/jobs/__init__.py defines no 'results_db'"
    assert named_paths("`bench_agent/sim/protocol_<scheme>.py`, `benchmarks/NAME.py`, ~/.ansible/cp") == []
