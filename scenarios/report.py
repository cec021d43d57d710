"""Reports from a run (JSON, Markdown, HTML), and the diff against a previous run.

Metrics (seed §7, methodology 004): success rate per condition and per
scenario × condition, Cold→Warm and Warm→Preloaded deltas, per-trap failure
rate, invent-rate, pass^k = mean over scenarios of C(c,k)/C(n,k) for
k = 1..n, spread over trials, tokens and turns where the stream reported them.
A cell nobody measured is a gap (``null`` / "—" with the reason), never a zero.
Every report carries the methodology hash over rubric + catalog + graders.
"""

from __future__ import annotations

import hashlib
import statistics
from math import comb
from pathlib import Path

PKG = Path(__file__).parent
# every file that changes grading or the agent's brief (its prompt, sandbox, harness command line)
GRADER_FILES = ("rubric.py", "checker.py", "matching.py", "t1.py", "safe.py", "judge.py", "labcheck.py", "evidence.py",
                "surface.py", "runner.py", "adapters.py", "mcpmap.py", "shell.py", "stance.py", "roles.py", "grade.py",
                "sandbox.py", "scenario.py")
CONDS = ("cold", "warm", "preloaded")


def methodology_hash() -> str:
    """sha256 over the rubric, every catalog file and the grader sources (first 16 hex)."""
    h = hashlib.sha256()
    from scenarios.surface import CATALOG

    files = [(f, PKG / f) for f in GRADER_FILES]
    files += [(f"catalog/{p.relative_to(CATALOG)}", p) for p in sorted(CATALOG.rglob("*.toml"))]
    for name, f in files:
        h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _rate(trials: list[dict]) -> float | None:
    done = [t for t in trials if t.get("status") == "done"]
    return None if not done else sum(1 for t in done if t.get("pass")) / len(done)


def pass_hat_k(cells: dict[str, tuple[int, int]], n: int) -> dict[int, float | None]:
    """pass^k = mean over scenarios of C(c,k)/C(n,k) (the chance k random trials all pass)."""
    out: dict[int, float | None] = {}
    for k in range(1, n + 1):
        vals = [comb(c, k) / comb(m, k) for c, m in cells.values() if m >= k]
        out[k] = round(sum(vals) / len(vals), 4) if vals else None
    return out


def aggregate(run: dict) -> dict:
    trials = [t for t in run["trials"]]
    measured = [t for t in trials if t.get("status") == "done"]
    by_cond: dict = {}
    for cond in run["conditions"]:
        ts = [t for t in measured if t["condition"] == cond]
        cells = {}
        for sid in run["scenarios"]:
            cell = [t for t in ts if t["scenario"] == sid]
            if cell:
                cells[sid] = (sum(1 for t in cell if t.get("pass")), len(cell))
        weighted = [_weighted(t) for t in ts]
        by_cond[cond] = {
            "rate": _rate(ts), "trials": len(ts),
            "core_rate": _rate([t for t in ts if t["scenario"] in run.get("core", [])]),
            "pass_hat_k": pass_hat_k(cells, run["n"]),
            "spread": round(statistics.pstdev([c / m for c, m in cells.values()]), 4) if len(cells) > 1 else None,
            "score_std": round(statistics.pstdev(weighted), 4) if len(weighted) > 1 else None,
            "invent_rate": (sum(1 for t in ts if (t.get("scores") or {}).get("d4") == 0) / len(ts)) if ts else None,
            "tokens": _mean_tokens(ts), "turns": _mean([t.get("turns") for t in ts]),
            "judge_parse_failures": sum(1 for t in ts if (t.get("judge") or {}).get("parse_failed")),
            "judge_disagreements": sum(1 for t in ts if (t.get("judge") or {}).get("disagreements")),
            "harness_errors": sum(1 for t in trials if t["condition"] == cond and t.get("status") in ("error", "timeout")),
        }
    cells = {}
    for sid in run["scenarios"]:
        row = {}
        for cond in run["conditions"]:
            ts = [t for t in trials if t["scenario"] == sid and t["condition"] == cond]
            gap = _gap_reason(run, sid, cond, ts)
            done = [t for t in ts if t.get("status") == "done"]
            scores = [_weighted(t) for t in done]
            row[cond] = {"rate": _rate(ts), "n": len(done), "passes": sum(1 for t in done if t.get("pass")), "gap": gap,
                         "score_mean": round(statistics.fmean(scores), 4) if scores else None,
                         "score_std": round(statistics.pstdev(scores), 4) if len(scores) > 1 else None,
                         "errors": sum(1 for t in ts if t.get("status") in ("error", "timeout")),
                         "why": _why(done), "invented": sorted({x.split(":")[0] for t in done for x in t.get("invented") or []})}
        cells[sid] = row
    return {"run_id": run["run_id"], "agent": run["agent"], "methodology": run["methodology"], "n": run["n"],
            "model": run.get("model"), "harness_version": run.get("harness_version"), "state": run.get("state"),
            "judge": run.get("judge"), "judge2": run.get("judge2"), "inter_rater": _inter_rater(measured),
            "isolation": run.get("isolation"), "planned_preview": run.get("planned_preview", False),
            "by_condition": by_cond, "cells": cells, "deltas": _deltas(by_cond, cells),
            "traps": _trap_rates(run, measured), "pending": run.get("pending", {}),
            "timeouts": sum(1 for t in trials if t.get("status") == "timeout")}


def _why(trials: list[dict]) -> list[dict]:
    """Why a cell's trials failed: each failing dimension/trap/assertion, how often, one piece of evidence."""
    seen: dict = {}
    for t in trials:
        if t.get("pass"):
            continue
        whys = t.get("why") or [{"what": r, "evidence": ""} for r in t.get("reasons") or []]
        for w in {w["what"]: w for w in whys}.values():
            row = seen.setdefault(w["what"], {"what": w["what"], "trials": 0, "evidence": w.get("evidence", "")})
            row["trials"] += 1
    return sorted(seen.values(), key=lambda r: -r["trials"])


def _inter_rater(trials: list[dict]) -> dict | None:
    """Agreement of the two judges' own verdicts where both decided (None without a second rater)."""
    from scenarios.judge import cohen_kappa

    pairs = [((t.get("judge") or {}).get("alone"), (t.get("judge2") or {}).get("alone")) for t in trials]
    pairs = [(a == "pass", b == "pass") for a, b in pairs if a in ("pass", "fail") and b in ("pass", "fail")]
    if not pairs:
        return None
    k, cm = cohen_kappa([a for a, _ in pairs], [b for _, b in pairs])
    return {"n": len(pairs), "kappa": round(k, 4), "confusion": cm}


def _weighted(t: dict) -> float:
    from scenarios.rubric import weighted

    got, top = weighted(t.get("scores") or {}, t["condition"])
    return got / top if top else 0.0


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float))]
    return round(sum(xs) / len(xs), 4) if xs else None


def _mean_tokens(ts: list[dict]) -> dict | None:
    keys = sorted({k for t in ts for k in (t.get("tokens") or {})})
    if not keys:
        return None
    return {k: _mean([(t.get("tokens") or {}).get(k) for t in ts]) for k in keys}


def _gap_reason(run: dict, sid: str, cond: str, ts: list[dict]) -> str | None:
    if sid in run.get("pending", {}):
        return "pending: needs " + ", ".join(run["pending"][sid])
    if not ts:
        return "not in this run"
    nm = [t for t in ts if t.get("status") == "not_measured"]
    if nm and len(nm) == len(ts):
        return nm[0].get("reason", "not measured")
    errs = [t for t in ts if t.get("status") in ("error", "timeout")]
    if errs and len(errs) == len(ts):
        return "harness failed: " + errs[0].get("reason", errs[0]["status"])
    return None


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 4)


def _deltas(by_cond: dict, cells: dict) -> dict:
    g = lambda c: (by_cond.get(c) or {}).get("rate")  # noqa: E731
    per = {sid: {"cold_to_warm": _delta(row.get("cold", {}).get("rate"), row.get("warm", {}).get("rate")),
                 "warm_to_preloaded": _delta(row.get("warm", {}).get("rate"), row.get("preloaded", {}).get("rate")),
                 "cli_to_mcp": _delta(row.get("preloaded", {}).get("rate"), row.get("mcp", {}).get("rate"))}
           for sid, row in cells.items()}
    return {"cold_to_warm": _delta(g("cold"), g("warm")), "warm_to_preloaded": _delta(g("warm"), g("preloaded")),
            "cli_to_mcp": _delta(g("preloaded"), g("mcp")),
            "per_scenario": per}


def _trap_rates(run: dict, trials: list[dict]) -> dict:
    out: dict = {}
    for t in trials:
        for tr in t.get("traps") or []:
            key = f"{t['scenario']}:{tr['id']}"
            row = out.setdefault(key, {"central": tr["central"], "walked": 0, "decided": 0})
            if tr.get("respected") is not None:
                row["decided"] += 1
                row["walked"] += 0 if tr["respected"] else 1
    for row in out.values():
        row["failure_rate"] = round(row["walked"] / row["decided"], 4) if row["decided"] else None
    return out


def diff(cur: dict, prev: dict) -> dict:
    """Cell-by-cell change against a previous aggregate; flags a methodology change."""
    changes = []
    for sid, row in cur["cells"].items():
        for cond, cell in row.items():
            before = prev.get("cells", {}).get(sid, {}).get(cond, {}).get("rate")
            if cell["rate"] != before:
                changes.append({"scenario": sid, "condition": cond, "before": before, "after": cell["rate"],
                                "delta": _delta(before, cell["rate"])})
    return {"previous_run": prev.get("run_id"), "comparable": prev.get("methodology") == cur["methodology"],
            "previous_methodology": prev.get("methodology"),
            "by_condition": {c: _delta((prev.get("by_condition", {}).get(c) or {}).get("rate"), v["rate"])
                             for c, v in cur["by_condition"].items()},
            "regressions": [c for c in changes if c["delta"] is not None and c["delta"] < 0],
            "changes": changes}


def markdown(agg: dict, d: dict | None = None) -> str:
    from scenarios.render import markdown as md

    return md(agg, d)


def html_report(agg: dict, d: dict | None = None) -> str:
    from scenarios.render import html as h

    return h(agg, d)
