"""Intervals for the rates a report prints: Wilson's score interval, Newcombe's for a difference, pass^k.

A rate over three trials is not a number to act on without its uncertainty: 2/3 is anywhere from
21 % to 94 % at 95 % confidence. Every rate in a report carries a Wilson 95 % interval (it stays
inside [0, 1] and is sound at 0/n and n/n, where the normal approximation collapses to a point), a
delta between two conditions Newcombe's hybrid score interval built from the two Wilson intervals,
and pass^k (tau-bench's estimator: the chance that k trials drawn from a cell's n all pass) its
spread across scenarios.
"""

from __future__ import annotations

import statistics
from math import comb, sqrt

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials (None when n is 0: nothing was measured)."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float] | None:
    """95 % interval of p2 - p1 (Newcombe 1998, method 10: the hybrid score interval from two Wilson intervals)."""
    a, b = wilson(k1, n1), wilson(k2, n2)
    if a is None or b is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p2 - p1
    lo = d - sqrt((p2 - b[0]) ** 2 + (a[1] - p1) ** 2)
    hi = d + sqrt((b[1] - p2) ** 2 + (p1 - a[0]) ** 2)
    return (round(max(-1.0, lo), 4), round(min(1.0, hi), 4))


def pass_hat_k(cells: dict[str, tuple[int, int]], n: int) -> dict[int, dict | None]:
    """pass^k for k = 1..n: the mean over scenarios of C(c,k)/C(m,k), with its spread over scenarios.

    Each value is ``{"mean", "std", "min", "max", "scenarios"}`` (population std of the per-scenario
    values; None with fewer than two scenarios), or None when no scenario has k measured trials."""
    out: dict[int, dict | None] = {}
    for k in range(1, n + 1):
        vals = [comb(c, k) / comb(m, k) for c, m in cells.values() if m >= k]
        out[k] = None if not vals else {
            "mean": round(statistics.fmean(vals), 4),
            "std": round(statistics.pstdev(vals), 4) if len(vals) > 1 else None,
            "min": round(min(vals), 4), "max": round(max(vals), 4), "scenarios": len(vals)}
    return out
