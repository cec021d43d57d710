"""A bisection that runs in seconds with no board: each build is deployed by a lab action, and a bad build's action
prints a BUG line the job rejects (the board's verdict: failed, not the lab's), so `panio bisect start` finds the
first bad build through real jobs in the results database."""

from __future__ import annotations

from pathlib import Path

JOB = """name = "boot"
[[steps]]
name = "boots clean"
run = "panio action run ${target} ${build.flash}"
reject_output = "BUG:"
"""
FIRST_BAD = 6  # of eight builds


def deploy_actions(panio, target: str) -> None:
    """``flash-good`` and ``flash-bad`` on ``target``."""
    panio("action", "add", "flash-good", "-t", target, "--command", "/bin/echo boot ok")
    panio("action", "add", "flash-bad", "-t", target, "--command", "/bin/echo BUG: oops at 0000dead")


def builds_and_job(root: Path) -> tuple[str, str]:
    """Eight builds, b01..b08, b06 the first bad one, and the job file: (job, builds) paths."""
    builds = root / "builds.txt"
    builds.write_text("".join(f"b{i:02d} flash=flash-{'bad' if i >= FIRST_BAD else 'good'}\n" for i in range(1, 9)))
    job = root / "boot.toml"
    job.write_text(JOB)
    return str(job), str(builds)


def bisect(panio, root: Path, target: str) -> dict:
    """A whole bisection on ``target`` (its actions added before): what `panio bisect start --json` printed."""
    job, builds = builds_and_job(root)
    r = panio("bisect", "start", job, "--target", target, "--good", "b01", "--bad", "b08", "--builds", builds,
              "--json", timeout=120).json()
    assert r["first_bad"] == f"b{FIRST_BAD:02d}", r
    return r
