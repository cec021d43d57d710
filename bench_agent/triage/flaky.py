"""Flakiness and outlier boards, from the results database's job history.

A job is **flaky** on a target when its runs with identical inputs (same job
file, same lab table for the target, same panio) both pass and fail, and the
verdict changes more than once: pass, fail, pass. A single change (passes,
then only failures) is a **regression**: something changed that the inputs do
not show (the board, its firmware, the network), and triage says what.

Only verdicts on the board count (health ``complete``); a run the lab failed
(incomplete, timed out, canceled) says nothing about the board and is counted
apart. A board whose jobs or health checks fail more than its peers' (its
failure rate at least ``OUTLIER_MARGIN`` above the median of the other boards,
with ``OUTLIER_MIN`` failures) is named.
"""

from __future__ import annotations

import statistics
from typing import Any

DEFAULT_RUNS = 20
OUTLIER_MARGIN = 0.25
OUTLIER_MIN = 2
PEERS_WINDOW = 500  # recent finished jobs looked at for outlier boards


def _key(job: dict) -> tuple:
    i = job["spec"].get("inputs") or {}
    return i.get("job_sha256"), i.get("lab_sha256"), i.get("panio")


def verdicts(runs: list[dict]) -> dict[str, Any]:
    """Runs of one job on one target, newest first: pass rate, flaky label, regression."""
    judged = [r for r in runs if r["health"] == "complete" and r["result"] in ("passed", "failed")]
    passes = sum(r["result"] == "passed" for r in judged)
    out: dict[str, Any] = {"runs": len(runs), "judged": len(judged), "passed": passes,
                           "failed": len(judged) - passes, "lab_failed": len(runs) - len(judged),
                           "pass_rate": round(passes / len(judged), 3) if judged else None,
                           "flaky": False, "why": None, "regression_since": None,
                           "sequence": "".join("P" if r["result"] == "passed" else "F" for r in reversed(judged))}
    if not judged:
        return out
    same = [r for r in judged if _key(r) == _key(judged[0])]  # the newest run's inputs
    seq = [r["result"] == "passed" for r in reversed(same)]  # oldest first
    changes = sum(a != b for a, b in zip(seq, seq[1:]))
    if changes >= 2:
        out["flaky"] = True
        out["why"] = (f"identical inputs, {sum(seq)} passed and {len(seq) - sum(seq)} failed of the last {len(seq)}, "
                      f"the verdict changed {changes} times")
    elif changes == 1 and not seq[-1]:
        first_fail = next(r for r in reversed(same) if r["result"] == "failed")
        out["regression_since"] = first_fail["id"]
        out["why"] = f"passed, then fails since job {first_fail['id']} with identical inputs"
    return out


def history(store, name: str, target: str | None = None, runs: int = DEFAULT_RUNS) -> dict[str, Any]:
    """The last ``runs`` finished runs of job ``name`` per target (one target with ``target``), and the boards
    that fail more than their peers."""
    jobs = _finished(store, name=name, target=target, limit=runs * (1 if target else 20))
    by_target: dict[str, list[dict]] = {}
    for j in jobs:
        if len(by_target.setdefault(j["target"], [])) < runs:
            by_target[j["target"]].append(j)
    targets = {t: {**verdicts(rs), "last": [{"id": r["id"], "health": r["health"], "result": r["result"]}
                                            for r in rs[:10]]} for t, rs in sorted(by_target.items())}
    return {"name": name, "runs": runs, "targets": targets, "outliers": outliers(store)}


def for_job(store, job: dict, runs: int = DEFAULT_RUNS) -> dict[str, Any]:
    """The flaky label of ``job``'s own history: its name on its target, up to it."""
    rs = [j for j in _finished(store, name=job["name"], target=job["target"], limit=runs, before=job["id"] + 1)]
    return verdicts(rs)


def outliers(store, window: int = PEERS_WINDOW) -> list[dict[str, Any]]:
    """Boards whose jobs (or health checks) fail more than their peers', over the last ``window`` finished jobs."""
    out = []
    recent = _finished(store, limit=window)
    for kind in ("job", "health_check"):
        rates: dict[str, list[int]] = {}
        for j in recent:
            if (j["spec"].get("kind") or "job") != kind or j["health"] != "complete":
                continue
            rates.setdefault(j["target"], []).append(j["result"] == "failed")
        if len(rates) < 2:
            continue
        for target, fails in sorted(rates.items()):
            peers = [sum(f) / len(f) for t, f in rates.items() if t != target]
            rate, median = sum(fails) / len(fails), statistics.median(peers)
            if sum(fails) >= OUTLIER_MIN and rate >= median + OUTLIER_MARGIN:
                what = "health checks" if kind == "health_check" else "jobs"
                out.append({"target": target, "kind": kind, "fail_rate": round(rate, 3),
                            "peers_median": round(median, 3), "failed": sum(fails), "of": len(fails),
                            "why": f"{target} failed {sum(fails)} of its last {len(fails)} {what} "
                                   f"({rate:.0%}; its peers' median {median:.0%})"})
    return out


def _finished(store, limit: int, before: int | None = None, **equal) -> list[dict]:
    return [j for j in store.list_jobs(limit=limit, state="done", before=before, **equal)]
