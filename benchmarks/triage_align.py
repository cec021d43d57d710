"""Triage's log comparison on two 100,000-line serial logs: goal at most 1 s (issue 28).

Two logs of one job from two nights: every line's time stamp differs, and the failing one has a line more
(a panic), one changed and ten missing. Measured, alternating (ABAB, paired by round):

A. ``bench_agent.triage.compare.compare``: normalise both logs, align them (``logalign``: common head and tail,
   patience anchors, difflib in small gaps), find the first divergence, the never-reached and the late lines;
B. the same normalisation, then ``difflib.SequenceMatcher(None, a, b).get_opcodes()`` on the same line ids:
   the textbook alignment, as a yardstick.

Printed: each side's median wall and CPU time, the median of the paired ratios (B / A), the load average,
and A's CPU time against the goal (met / NOT met). CPU time is what the goal is judged by: on a shared
2-core machine wall time measures the neighbours too.

Run: .venv/bin/python benchmarks/triage_align.py [--rounds N] [--lines N] [--json]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import statistics
import time

from bench_agent.triage import logalign
from bench_agent.triage.compare import compare

GOAL_S = 1.0
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs"


def logs(n: int) -> tuple[list[str], list[str]]:
    rnd = random.Random(28)
    words = ["eth0", "mmc0", "usb", "irq", "dma", "cpu", "thermal", "i2c", "spi", "gpio"]
    passing = [f"[10:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:03d}] #{i} [{i / 1000:12.6f}] "
               f"{rnd.choice(words)}: event {rnd.randrange(5000)} state {rnd.choice(['ok', 'busy', 'idle'])}"
               for i in range(n)]
    failing = [line.replace("[10:", "[11:") for line in passing]
    failing.insert(n * 7 // 10, f"[11:00:00.000] #{n} {PANIC}")
    failing[n * 9 // 10] = f"[11:00:00.000] #{n + 1} thermal: event 1 state CRITICAL"
    del failing[n * 95 // 100:n * 95 // 100 + 10]
    return passing, failing


def side_a(a: list[str], b: list[str]) -> None:
    d = compare(a, b, timed=True)
    assert d["first"]["line"].endswith(PANIC)


def side_b(a: list[str], b: list[str]) -> None:
    na, nb = logalign.normalise(a), logalign.normalise(b)
    ids: dict[str, int] = {}
    ia = [ids.setdefault(x, len(ids)) for x in na]
    ib = [ids.setdefault(x, len(ids)) for x in nb]
    difflib.SequenceMatcher(None, ia, ib).get_opcodes()


def timed(fn, *args) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - w, time.process_time() - c


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--lines", type=int, default=100_000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    a, b = logs(args.lines)
    rows = []
    for _ in range(args.rounds):  # ABAB: each round one of each, back to back
        rows.append((timed(side_a, a, b), timed(side_b, a, b)))
    a_wall = statistics.median(r[0][0] for r in rows)
    a_cpu = statistics.median(r[0][1] for r in rows)
    b_wall = statistics.median(r[1][0] for r in rows)
    b_cpu = statistics.median(r[1][1] for r in rows)
    ratio = statistics.median(r[1][1] / r[0][1] for r in rows)
    load = os.getloadavg()[0]
    met = a_cpu <= GOAL_S
    out = {"lines": args.lines, "rounds": args.rounds, "triage_wall_s": round(a_wall, 3),
           "triage_cpu_s": round(a_cpu, 3), "difflib_wall_s": round(b_wall, 3), "difflib_cpu_s": round(b_cpu, 3),
           "difflib_over_triage": round(ratio, 2), "load": load, "goal_s": GOAL_S, "met": met}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{args.lines:,}-line logs, {args.rounds} rounds ABAB, load average {load:.1f}")
    print(f"  triage.compare      median {a_wall:.3f} s wall, {a_cpu:.3f} s CPU "
          f"(goal <= {GOAL_S:g} s: {'met' if met else 'NOT met'})")
    print(f"  difflib yardstick   median {b_wall:.3f} s wall, {b_cpu:.3f} s CPU "
          f"(median of paired CPU ratios difflib/triage: {ratio:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
