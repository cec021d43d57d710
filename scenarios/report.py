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
                "sandbox.py", "scenario.py", "meaning.py")
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


def catalog_hash() -> str:
    """sha256 over the catalog's files alone (first 16 hex): which scenarios, references and traps a run used."""
    from scenarios.surface import CATALOG

    h = hashlib.sha256()
    for p in sorted(CATALOG.rglob("*")):
        if p.is_file() and p.suffix in (".toml", ".md"):
            h.update(str(p.relative_to(CATALOG)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


LIMITS = ("limit", "timeout")  # a trial stopped at a limit (time, turns, tokens); "timeout": run files before 0.2


def _limit_kind(t: dict) -> str:
    return t.get("limit") or "time"


def _ci(k: int, n: int) -> list[float] | None:
    from scenarios.stats import wilson

    ci = wilson(k, n)
    return list(ci) if ci else None


def _rate_ci(trials: list[dict]) -> list[float] | None:
    done = [t for t in trials if t.get("status") == "done"]
    return _ci(sum(1 for t in done if t.get("pass")), len(done))


def _limits(trials: list[dict]) -> dict:
    out: dict = {}
    for t in trials:
        if t.get("status") in LIMITS:
            out[_limit_kind(t)] = out.get(_limit_kind(t), 0) + 1
    return out


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
        core = [t for t in ts if t["scenario"] in run.get("core", [])]
        invents = sum(1 for t in ts if (t.get("scores") or {}).get("d4") == 0)
        from scenarios.stats import pass_hat_k as phk

        by_cond[cond] = {
            "rate": _rate(ts), "rate_ci": _rate_ci(ts), "trials": len(ts), "passes": sum(1 for t in ts if t.get("pass")),
            "core_rate": _rate(core), "core_rate_ci": _rate_ci(core),
            "pass_hat_k": pass_hat_k(cells, run["n"]), "pass_hat_k_spread": phk(cells, run["n"]),
            "invent_rate_ci": _ci(invents, len(ts)),
            "spread": round(statistics.pstdev([c / m for c, m in cells.values()]), 4) if len(cells) > 1 else None,
            "score_std": round(statistics.pstdev(weighted), 4) if len(weighted) > 1 else None,
            "invent_rate": (sum(1 for t in ts if (t.get("scores") or {}).get("d4") == 0) / len(ts)) if ts else None,
            "tokens": _mean_tokens(ts), "turns": _mean([t.get("turns") for t in ts]),
            "judge_parse_failures": sum(1 for t in ts if (t.get("judge") or {}).get("parse_failed")),
            "judge_disagreements": sum(1 for t in ts if (t.get("judge") or {}).get("disagreements")),
            "harness_errors": sum(1 for t in trials if t["condition"] == cond and t.get("status") == "error"),
            "limits": _limits([t for t in trials if t["condition"] == cond]),
            "retried": sum(1 for t in trials if t["condition"] == cond and t.get("attempts")),
        }
    cells = {}
    for sid in run["scenarios"]:
        row = {}
        for cond in run["conditions"]:
            ts = [t for t in trials if t["scenario"] == sid and t["condition"] == cond]
            gap = _gap_reason(run, sid, cond, ts)
            done = [t for t in ts if t.get("status") == "done"]
            scores = [_weighted(t) for t in done]
            row[cond] = {"rate": _rate(ts), "rate_ci": _rate_ci(ts), "n": len(done),
                         "passes": sum(1 for t in done if t.get("pass")), "gap": gap,
                         "score_mean": round(statistics.fmean(scores), 4) if scores else None,
                         "score_std": round(statistics.pstdev(scores), 4) if len(scores) > 1 else None,
                         "errors": sum(1 for t in ts if t.get("status") == "error"),
                         "limits": _limits(ts), "limit_reasons": [t.get("reason") for t in ts if t.get("status") in LIMITS],
                         "why": _why(done), "invented": sorted({x.split(":")[0] for t in done for x in t.get("invented") or []})}
        cells[sid] = row
    return {"run_id": run["run_id"], "agent": run["agent"], "methodology": run["methodology"], "n": run["n"],
            "params": {k: run.get(k) for k in ("adapter", "agent_command", "agent_version", "panio_version", "catalog",
                                                "timeout_s", "parallel", "retry", "provider", "trials_planned")},
            "resumed": run.get("resumed", []), "regraded_from": _regraded(run.get("regraded_from")),
            "retries": sum(len(t.get("attempts") or []) for t in trials),
            "model": run.get("model"), "harness_version": run.get("harness_version"), "state": run.get("state"),
            "judge": run.get("judge"), "judge2": run.get("judge2"), "inter_rater": _inter_rater(measured),
            "isolation": run.get("isolation"), "planned_preview": run.get("planned_preview", False),
            "by_condition": by_cond, "cells": cells, "deltas": _deltas(by_cond, cells),
            "traps": _trap_rates(run, measured), "pending": run.get("pending", {}),
            "timeouts": sum(1 for t in trials if t.get("status") in LIMITS and _limit_kind(t) == "time"),
            "limits": _limits(trials)}


def _regraded(src: dict | None) -> dict | None:
    if not src:
        return None
    return {k: src.get(k) for k in ("run_id", "file", "methodology", "catalog", "at", "trials", "judges")} | {
        "verdicts_changed": len(src.get("verdicts_changed") or []), "changed": src.get("verdicts_changed") or []}


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
    errs = [t for t in ts if t.get("status") == "error"]
    if errs and len(errs) == len(ts):
        return "harness failed: " + errs[0].get("reason", errs[0]["status"])
    stopped = [t for t in ts if t.get("status") in LIMITS]
    if stopped and len(stopped) + len(errs) + len(nm) == len(ts):
        return f"hit a limit ({_limit_kind(stopped[0])}): " + stopped[0].get("reason", "limit")
    return None


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 4)


PAIRS = (("cold_to_warm", "cold", "warm"), ("warm_to_preloaded", "warm", "preloaded"), ("cli_to_mcp", "preloaded", "mcp"))


def _delta_ci(a: dict | None, b: dict | None, n_key: str) -> list[float] | None:
    from scenarios.stats import newcombe

    if not a or not b or not a.get(n_key) or not b.get(n_key):
        return None
    ci = newcombe(a["passes"], a[n_key], b["passes"], b[n_key])
    return list(ci) if ci else None


def _deltas(by_cond: dict, cells: dict) -> dict:
    """Differences in rate between conditions, each with Newcombe's 95 % interval."""
    g = lambda c: (by_cond.get(c) or {}).get("rate")  # noqa: E731
    per = {}
    for sid, row in cells.items():
        per[sid] = {}
        for key, a, b in PAIRS:
            per[sid][key] = _delta(row.get(a, {}).get("rate"), row.get(b, {}).get("rate"))
            per[sid][key + "_ci"] = _delta_ci(row.get(a), row.get(b), "n")
    out: dict = {"per_scenario": per}
    for key, a, b in PAIRS:
        out[key] = _delta(g(a), g(b))
        out[key + "_ci"] = _delta_ci(by_cond.get(a), by_cond.get(b), "trials")
    return out


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
        row["failure_rate_ci"] = _ci(row["walked"], row["decided"])
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
