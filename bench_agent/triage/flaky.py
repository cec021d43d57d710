"""Flakiness and outlier boards, from the results database's job history.

A job is **flaky** on a target only on evidence: among its runs with identical
inputs (same job file, same lab table for the target, same panio: the same
build of the same job), at least ``FLAKY_MIN_FAILURES`` separate failures with
passes between them (pass, fail, pass, fail). One failure among passes is not
enough, nor is an outage then a fix (passes, a run of failures, passes again:
one cause, mended). A single change (passes, then only failures) is a
**regression**: something changed that the inputs do not show (the board, its
firmware, the network), and triage says what.

Only verdicts on the board count (health ``complete``); a run the lab failed
(incomplete, timed out, canceled) says nothing about the board and is counted
apart. A board whose jobs or health checks fail more than its peers' (its
failure rate at least ``OUTLIER_MARGIN`` above the median of the other boards,
with ``OUTLIER_MIN`` failures) is named; each board is judged on its own last
``PEERS_WINDOW`` jobs, not on its share of the lab's newest jobs (a board the
lab used little would otherwise hardly count).
"""

from __future__ import annotations

import statistics
from typing import Any

DEFAULT_RUNS = 20
FLAKY_MIN_FAILURES = 2  # separate failures (passes between them) among identical runs before "flaky"
OUTLIER_MARGIN = 0.25
OUTLIER_MIN = 2
LAB_WINDOW = 500  # the lab's recent finished jobs: which boards (and kinds of job) there are to compare
PEERS_WINDOW = 50  # each board's own last finished jobs, its rate's window


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
    spells = sum(not ok and (i == 0 or seq[i - 1]) for i, ok in enumerate(seq))  # separate runs of failures
    if spells >= FLAKY_MIN_FAILURES and any(seq):
        out["flaky"] = True
        out["why"] = (f"identical inputs, {sum(seq)} passed and {len(seq) - sum(seq)} failed of the last {len(seq)}: "
                      f"{spells} separate failures with passes between them, the verdict changed {changes} times")
    elif spells == 1 and seq[-1] and changes == 2:
        first_fail = next(r for r in reversed(same) if r["result"] == "failed")
        failed = len(seq) - sum(seq)
        out["why"] = ("one failure among passes (job {0}): not flaky on one failure".format(first_fail["id"])
                      if failed == 1 else f"{failed} failures in a row since job {first_fail['id']}, then passes "
                      "again: an outage then a fix, not flaky")
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


def outliers(store, window: int = PEERS_WINDOW, lab_window: int = LAB_WINDOW) -> list[dict[str, Any]]:
    """Boards whose jobs (or health checks) fail more than their peers': each board's rate over its own last
    ``window`` finished jobs (the boards: those of the lab's last ``lab_window``)."""
    out = []
    boards = sorted({j["target"] for j in _finished(store, limit=lab_window)})
    own = {t: _finished(store, limit=window, target=t) for t in boards}
    for kind in ("job", "health_check"):
        rates: dict[str, list[int]] = {}
        for t in boards:
            for j in own[t]:
                if (j["spec"].get("kind") or "job") != kind or j["health"] != "complete":
                    continue
                rates.setdefault(t, []).append(j["result"] == "failed")
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
