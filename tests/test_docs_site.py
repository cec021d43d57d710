"""The docs site: mkdocs-material builds with --strict (a broken link, anchor or a page left out of the nav
fails), the command reference is the live CLI's, and the README's links point at files that exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = str(Path(sys.executable).parent / "mkdocs")
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([MKDOCS, "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)],
                          capture_output=True, text=True, env=ENV, timeout=300)


def test_the_site_builds_strict(tmp_path):
    r = build(ROOT, tmp_path / "site")
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stderr
    page = (tmp_path / "site" / "commands" / "index.html").read_text()
    assert "panio dashboard" in page and "PANIO_DASHBOARD_TOKEN" in page
    assert (tmp_path / "site" / "dashboard" / "index.html").exists()


def test_a_broken_link_fails_the_build(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a") as f:
        f.write("\nSee [the gone page](gone.md) and [a missing part](jobs.md#no-such-section).\n")
    r = build(tmp_path, tmp_path / "site")
    assert r.returncode == 1
    assert "'gone.md'" in r.stderr and "#no-such-section" in r.stderr


def test_the_command_reference_is_the_live_cli():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = (ROOT / "docs" / "commands.md").read_text()
    from controller.cli.commands import COMMANDS

    for name in COMMANDS:
        assert f"## panio {name}\n" in text, name


def test_readme_links_point_at_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if "://" not in target and not target.startswith("mailto:"):
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
