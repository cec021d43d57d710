"""Bisections for the dashboard and the controller API: the list, and one bisection as `panio bisect status --json`
gives it plus the range after each judged probe (``steps``), under a token's read scope (as a job's)."""

from __future__ import annotations

from typing import Any

from bench_agent.errors import Refused
from controller import backends
from controller.api import tokens as tk
from controller.api.jobs import readable

_STORES: dict[str, Any] = {}


def store():
    """One ``BisectStore`` per database for the life of the process (as the dashboard keeps its results store)."""
    from bench_agent.results.bisects import BisectStore

    url = backends.results_url()
    if url not in _STORES:
        _STORES[url] = BisectStore(url)
    return _STORES[url]


def view(rec: dict) -> dict:
    """``rec`` (``BisectStore.get``) as `panio bisect status --json` shows it, plus ``steps``: each judged probe in
    the order it was judged with the range after it (``good``, ``bad``: build names; ``left``: builds between)."""
    from controller.jobs.bisect import report

    out = report(rec)
    out["steps"] = steps(rec)
    return out


def steps(rec: dict) -> list[dict]:
    """The range after each judged probe, replayed from the verdicts by the rule the bisection decided them with
    (``controller.jobs.bisect.narrowed``)."""
    from controller.jobs.bisect import narrowed

    builds = rec["builds"]
    good, bad = 0, len(builds) - 1
    seen: dict[int, list[str]] = {}
    out = []
    judged = sorted((p for p in rec["probes"] if p["verdict"] != "running"), key=lambda p: (p["at"], p["id"]))
    for p in judged:
        idx = p["build"]
        seen.setdefault(idx, []).append(p["verdict"])
        good, bad = narrowed(good, bad, idx, seen[idx], rec["repeat"])
        out.append({"build": builds[idx]["name"], "index": idx, "job_id": p["job_id"], "target": p.get("target"),
                    "verdict": p["verdict"], "why": p["why"], "at": p["at"], "good": builds[good]["name"],
                    "bad": builds[bad]["name"], "good_index": good, "bad_index": bad, "left": bad - good - 1})
    return out


def may_read(load_lab, token: dict, rec: dict) -> None:
    """``Refused`` (403) when a bisection's boards are outside ``token``'s allow list: its target, or for a tag
    the tag itself or every board it ran on and every board carrying it."""
    allowed = readable(load_lab, token)
    if allowed is None:
        return
    if rec.get("tag"):
        boards = {p.get("target") for p in rec.get("probes", []) if p.get("target")}
        boards |= {t for t, table in load_lab().targets.items() if rec["tag"] in table.get("tags", [])}
        if rec["tag"] in token["tags"] or (boards and boards <= allowed):
            return
        where = f"tag {rec['tag']}"
    elif rec.get("target") in allowed:
        return
    else:
        where = str(rec.get("target"))
    raise Refused(f"token {token['name']!r} may read only the jobs on {tk.allow_list(token)}; bisection "
                  f"{rec['id']} ran on {where}", token=token["name"], bisect=rec["id"])


def read(load_lab, token: dict, bisect_id: int) -> dict:
    """One bisection (``view``), only on the token's allow list."""
    rec = store().get(bisect_id)
    may_read(load_lab, token, rec)
    return view(rec)


def listed(load_lab, token: dict, limit: int) -> list[dict]:
    """The newest ``limit`` bisections the token may read, each its state, range and first bad build once done."""
    s, everything = store(), readable(load_lab, token) is None
    out = []
    for row in s.listed(limit=limit):
        try:
            if not everything:
                may_read(load_lab, token, s.get(row["id"]))
        except Refused:
            continue
        out.append(summarize(row))
    return out


def summarize(row: dict) -> dict:
    """A listed bisection (``BisectStore.listed``) with its range's build names."""
    names = row["builds"]
    return {**{k: v for k, v in row.items() if k not in ("builds", "good", "bad")}, "builds": len(names),
            "first": names[0], "last": names[-1], "good": names[row["good"]], "bad": names[row["bad"]],
            "left": row["bad"] - row["good"] - 1, "first_bad": names[row["bad"]] if row["state"] == "done" else None}
