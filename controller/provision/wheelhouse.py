"""The wheelhouse a control host installs from: panio's own wheel and its dependencies, pinned.

The host gets exactly the versions the controller runs: the wheels are found
in the wheelhouse first, and ``constraints.txt`` pins every dependency, so a
host on the same Python needs no package index (``panio setup --offline``),
and one on another Python, or one needing a dependency this machine does not
(``async-timeout`` below Python 3.11.3), takes the rest from its index at the
pinned versions. panio's wheel is built reproducibly
(``SOURCE_DATE_EPOCH``) from a clean copy of the source tree, so the same code
gives the same bytes and a second ``panio setup`` copies nothing and changes
nothing. Dependency wheels are cached by the hash of their pins.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from bench_agent.errors import NotConfigured, SetupFailed

PACKAGES = ("controller", "bench_agent", "scenarios", "skills")
SOURCE_FILES = ("pyproject.toml", "README.md")
EPOCH = "315532800"  # 1980-01-01, the earliest time a zip file can hold


def source_root() -> Path:
    """The source clone this panio runs from (the playbooks and the code to ship live there)."""
    import controller

    root = Path(controller.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / "ansible" / "control_host.yml").is_file():
        raise NotConfigured(f"panio setup runs from a source clone of panio; {root} has no pyproject.toml and "
                            "ansible/ playbooks", hint="clone panio, `make install`, and run panio from that venv")
    return root


def pins() -> list[str]:
    """``name==version`` of every installed distribution panio needs at run time, recursively, following the
    extras asked for (``psycopg[binary]`` brings ``psycopg-binary``)."""
    seen: dict[str, str] = {}
    done: set[tuple[str, str]] = set()
    todo: list[tuple[str, frozenset[str]]] = [("panio", frozenset())]
    while todo:
        name, extras = todo.pop()
        name = _canonical(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist.version
        for extra in ("", *extras):
            if (name, extra) in done:
                continue
            done.add((name, extra))
            for req in dist.requires or []:
                parsed = _requirement(req, extra)
                if parsed is not None:
                    todo.append(parsed)
    seen.pop("panio", None)
    return sorted(f"{n}=={v}" for n, v in seen.items())


def _requirement(text: str, extra: str) -> tuple[str, frozenset[str]] | None:
    """The name and extras of a requirement that applies here with ``extra`` asked for ("": none), else None."""
    from packaging.requirements import Requirement

    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate({"extra": extra}):
        return None
    if extra and (req.marker is None or "extra" not in str(req.marker)):
        return None  # a base requirement: taken with extra ""
    return req.name, frozenset(req.extras)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build(cache: Path, version: str) -> Path:
    """``wheelhouse.tar``: panio's wheel, the dependency wheels and ``constraints.txt`` in one archive whose
    bytes depend only on theirs (so a host that has it already is sent nothing); built or reused.

    One file, not a folder: Ansible's ``copy`` of a folder checks each of its ~40 files over SSH in a task of
    its own, 35 s on every `panio setup` even when nothing changed; one archive is one check."""
    constraints = "\n".join(pins()) + "\n"
    digest = hashlib.sha256(constraints.encode()).hexdigest()[:16]
    deps = cache / f"deps-{digest}"
    if not (deps / ".complete").exists():
        _pip(["wheel", "--quiet", "--no-deps", "--wheel-dir", str(deps), *pins()], "the dependency wheels")
        (deps / ".complete").write_text(constraints)
    house = cache / "wheelhouse"
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir(parents=True)
    for wheel in deps.glob("*.whl"):
        os.link(wheel, house / wheel.name)
    _build_panio(house)
    (house / "constraints.txt").write_text(constraints)
    return _archive(house, cache / "wheelhouse.tar")


def _archive(folder: Path, out: Path) -> Path:
    """``folder``'s files in a tar archive, sorted, with fixed times, owners and modes: the same files make the
    same bytes."""
    import tarfile

    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(folder.iterdir()):
            info = tarfile.TarInfo(path.name)
            info.size, info.mtime, info.mode = path.stat().st_size, int(EPOCH), 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    return out


def _build_panio(out: Path) -> None:
    root = source_root()
    with tempfile.TemporaryDirectory(prefix="panio-wheel-") as tmp:
        stage = Path(tmp) / "src"
        stage.mkdir()
        for name in SOURCE_FILES:
            shutil.copy2(root / name, stage / name)
        for pkg in PACKAGES:  # a clean copy: no stale build/ or egg-info can leak files into the wheel
            shutil.copytree(root / pkg, stage / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        _pip(["wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(stage)], "panio's wheel",
             env={"SOURCE_DATE_EPOCH": EPOCH})


def _pip(args: list[str], what: str, env: dict[str, str] | None = None) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                       env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **(env or {})})
    if p.returncode != 0:
        tail = " ".join(p.stderr.strip().splitlines()[-3:])[-500:]
        raise SetupFailed(f"building {what} failed (pip exit {p.returncode}): {tail}",
                          hint="is the package index reachable from this machine, or the wheels in pip's cache?",
                          task=f"build {what}")
