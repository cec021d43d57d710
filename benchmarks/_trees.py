"""Two source trees side by side, for the benchmarks that compare a change with the commit before it
(``recorder_drain.py``, ``api_cpu.py``): a ``git worktree`` of ``--base`` made for the run (removed after), panio's
command line run from either tree (``MAIN`` with ``PYTHONPATH`` = the tree), and the paired rounds of one
measurement on each, a ratio per figure. (The leading underscore keeps `make bench` from running it.)
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Callable, Iterator

from _bench import paired

ROOT = Path(__file__).resolve().parent.parent
# panio's command line from the tree on PYTHONPATH (not the installed entry point: that is this tree's)
MAIN = "import sys; from controller.cli.main import main; sys.argv[0] = 'panio'; sys.exit(main())"


@contextlib.contextmanager
def base_tree(rev: str, root: Path) -> Iterator[tuple[Path, str]]:
    """A worktree of ``rev`` under ``root`` and its short commit id, removed on the way out."""
    path = root / "base"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev], check=True)
    try:
        short = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                               text=True, check=True).stdout.strip()
        yield path, short
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def paired_trees(measure: Callable[[Path], dict[str, float]], base: Path, rounds: int,
                 show: Callable[[bool, dict[str, float]], None] | None = None) -> dict[str, dict]:
    """``rounds`` pairs of ``measure(base)`` and ``measure(ROOT)``, alternating which goes first (``paired``);
    for each figure ``measure`` returns, a ``paired``-shaped result (floor: the base, panio: this tree) for
    ``_bench.row``. ``show(is_base, figures)`` hears each measurement."""
    sides: dict[bool, list[dict[str, float]]] = {True: [], False: []}

    def side(is_base: bool, tree: Path) -> Callable[[], float]:
        def one() -> float:
            figures = measure(tree)
            sides[is_base].append(figures)
            if show is not None:
                show(is_base, figures)
            return 1.0  # the ratios are taken per figure below
        return one

    pairs = paired(side(True, base), side(False, ROOT), rounds, warmup=0)
    out = {}
    for key in sides[False][0]:
        a, b = [r[key] for r in sides[True]], [r[key] for r in sides[False]]
        out[key] = {**pairs, "floor": a, "panio": b, "ratios": [y / x for x, y in zip(a, b)]}
    return out
