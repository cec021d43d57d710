"""What every benchmark shares: paired alternating rounds, the median of the paired ratios with its spread,
the load average beside each figure, the goal with met / NOT met, and the --json record `make bench` reads.

A *row* is one figure of docs/performance.md's table::

    {"figure": "panio --help / python -c pass", "ratio": 1.12, "spread": [1.05, 1.21], "op": "<=",
     "goal": 1.3, "met": true, "load": [2.1, 2.6], "panio": 11.8, "floor": 10.5, "unit": "ms", "rounds": 30}

``paired(floor, panio, rounds)`` runs the two sides alternately (ABAB..., the first side swapping every
round, so neither side always runs on a cache the other just warmed), after the same warm-up of each, and
takes the ratio of the two halves of each round: a pair close in time shares the machine's mood, which is
what makes the median of the ratios robust on a machine shared with other people's tests.

Each script prints its rows with ``print_rows`` and, with ``--json``, one JSON object on stdout instead.
When ``PANIO_BENCH_OUT`` names a folder (`make bench` sets it), the rows are also written to
``FOLDER/SCRIPT.json`` for ``benchmarks/_summary.py``'s one table. (The leading underscore keeps
`make bench` from running this module as a benchmark.)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def byte_compiled_env() -> dict[str, str]:
    """This environment as an installed panio runs: its modules' byte code compiled (in the source tree's
    ``__pycache__``, which git ignores) and read back, not compiled again by every process that a
    ``PYTHONDONTWRITEBYTECODE`` inherited from a test runner or a shell would make (a command measured that
    way pays for compiling panio's sources each time)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "controller"), str(root / "bench_agent"),
                    str(root / "skills")], check=True, env=env)
    return env


def paired(floor: Callable[[], float], panio: Callable[[], float], rounds: int, warmup: int = 1,
           key: Callable[[object], float] = float) -> dict:
    """``rounds`` pairs of one ``floor()`` and one ``panio()`` measurement, alternating which goes first.

    Each callable runs one measurement and returns its figure (seconds, or a rate): the caller decides what
    one measurement is, the same for both sides. Returns the samples, the per-pair ratios (panio / floor)
    and the load average range seen while measuring. A measurement may return more than its figure (a rate
    and the bytes lost): ``key`` picks the figure the ratio is taken of."""
    for _ in range(warmup):
        floor(), panio()
    a: list[float] = []
    b: list[float] = []
    loads = [load()]
    for i in range(rounds):
        if i % 2 == 0:
            a.append(floor())
            b.append(panio())
        else:
            b.append(panio())
            a.append(floor())
        loads.append(load())
    return {"floor": a, "panio": b, "ratios": [key(y) / key(x) for x, y in zip(a, b)], "load": [min(loads), max(loads)]}


def row(figure: str, pairs: dict, op: str, goal: float, unit: str = "s", scale: float = 1.0, **extra) -> dict:
    """The row for ``figure`` from a ``paired`` result: median ratio, its spread (25th-75th percentile of the
    pairs), both sides' medians (times ``scale``, in ``unit``), the goal and whether it is met."""
    ratios = sorted(pairs["ratios"])
    ratio = statistics.median(ratios)
    return {"figure": figure, "ratio": round(ratio, 3), "spread": [round(q, 3) for q in quartiles(ratios)],
            "op": op, "goal": goal, "met": meets(ratio, op, goal), "load": pairs["load"],
            "panio": round(statistics.median(pairs["panio"]) * scale, 4),
            "floor": round(statistics.median(pairs["floor"]) * scale, 4), "unit": unit,
            "rounds": len(ratios), **extra}


def value_row(figure: str, value: float, op: str, goal: float, unit: str, loads: list[float], **extra) -> dict:
    """A row whose figure is an absolute value (a p99 in ms, lines lost), not a ratio."""
    return {"figure": figure, "value": round(value, 4), "op": op, "goal": goal, "met": meets(value, op, goal),
            "unit": unit, "load": loads, **extra}


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def meets(value: float, op: str, goal: float) -> bool:
    return value <= goal if op == "<=" else value >= goal


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(len(ordered) * p / 100)) - 1))]


def fmt(r: dict) -> str:
    """One line: the figure, both sides, the ratio with its spread, the goal and met / NOT met, the load."""
    verdict = "met" if r["met"] else "NOT met"
    loads = f"load {r['load'][0]:.1f}-{r['load'][1]:.1f}"
    if "ratio" in r:
        lo, hi = r["spread"]
        return (f"{r['figure']:<62} panio={r['panio']:g} {r['unit']} floor={r['floor']:g} {r['unit']}  "
                f"ratio {r['ratio']:.2f}x ({lo:.2f}-{hi:.2f}, {r['rounds']} pairs)  goal {r['op']} {r['goal']:g}x  "
                f"{verdict}  {loads}")
    return f"{r['figure']:<62} {r['value']:g} {r['unit']}  goal {r['op']} {r['goal']:g} {r['unit']}  {verdict}  {loads}"


def emit(script: str, rows: list[dict], as_json: bool, extra: dict | None = None) -> None:
    """Print the rows (or, with ``as_json``, one JSON object) and record them for `make bench`'s summary."""
    record = {"benchmark": Path(script).stem, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "cores": os.cpu_count(), "rows": rows, **(extra or {})}
    out_dir = os.environ.get("PANIO_BENCH_OUT")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / f"{record['benchmark']}.json").write_text(json.dumps(record, indent=1))
    if as_json:
        print(json.dumps(record))
        return
    print(f"{record['benchmark']} ({record['date']}, {record['cores']} cores; ratio = panio / floor, "
          "median of paired alternating rounds, 25th-75th percentile in brackets)")
    for r in rows:
        print("  " + fmt(r))
    sys.stdout.flush()
