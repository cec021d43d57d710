"""A failed job's signature: the step that failed first and the first lines that diverge from a passing run of
the same job (in that step's output and in the serial logs, normalised as triage normalises them). Two failures
are the same failure when their steps are the same and they share a divergent line (``panio bisect``: a build
is bad only when its failure is the bad build's)."""

from __future__ import annotations

from typing import Any

from bench_agent.triage import compare, logalign


def of(store, job_id: int, passing_id: int | None) -> dict[str, Any]:
    """``{"step": name, "lines": [normalised divergent lines]}`` of job ``job_id`` against ``passing_id``."""
    job = store.job(job_id)
    step = next((s for s in job["steps"] if s["status"] in ("fail", "timeout", "error")), None)
    out: dict[str, Any] = {"step": step["name"] if step else None, "lines": []}
    if passing_id is None:
        return out
    base = store.job(passing_id)
    rules = logalign.Rules((job["spec"].get("triage") or {}).get("ignore", ()))
    first = compare.first_step(base, job)
    arts = (store.list_artifacts(base["id"]), store.list_artifacts(job["id"]))
    lines = []
    for d in compare._log_diffs(arts, base, job, first, rules):
        if d.get("first"):
            lines.append(logalign.normalise([compare.bare(d["first"]["line"]).strip()], rules)[0])
    out["lines"] = sorted(set(lines))
    return out


def same(bad: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether ``other`` is the failure ``bad`` is: the same step, and a divergent line in common (or neither has
    one)."""
    if bad.get("step") != other.get("step"):
        return False
    if not bad.get("lines") or not other.get("lines"):
        return not bad.get("lines") and not other.get("lines")
    return bool(set(bad["lines"]) & set(other["lines"]))
