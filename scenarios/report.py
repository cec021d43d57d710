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
import html
import statistics
from math import comb
from pathlib import Path

PKG = Path(__file__).parent
GRADER_FILES = ("rubric.py", "checker.py", "matching.py", "t1.py", "safe.py", "judge.py", "labcheck.py", "evidence.py")
CONDS = ("cold", "warm", "preloaded")


def methodology_hash() -> str:
    """sha256 over the rubric, every catalog file and the grader sources (first 16 hex)."""
    h = hashlib.sha256()
    files = [PKG / f for f in GRADER_FILES] + sorted((PKG / "catalog").rglob("*.toml"))
    for f in files:
        h.update(str(f.relative_to(PKG)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _rate(trials: list[dict]) -> float | None:
    done = [t for t in trials if t.get("status") in ("done", "timeout")]
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
    measured = [t for t in trials if t.get("status") in ("done", "timeout")]
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
        }
    cells = {}
    for sid in run["scenarios"]:
        row = {}
        for cond in run["conditions"]:
            ts = [t for t in trials if t["scenario"] == sid and t["condition"] == cond]
            gap = _gap_reason(run, sid, cond, ts)
            done = [t for t in ts if t.get("status") in ("done", "timeout")]
            scores = [_weighted(t) for t in done]
            row[cond] = {"rate": _rate(ts), "n": len(done), "passes": sum(1 for t in done if t.get("pass")), "gap": gap,
                         "score_mean": round(statistics.fmean(scores), 4) if scores else None,
                         "score_std": round(statistics.pstdev(scores), 4) if len(scores) > 1 else None}
        cells[sid] = row
    return {"run_id": run["run_id"], "agent": run["agent"], "methodology": run["methodology"], "n": run["n"],
            "isolation": run.get("isolation"), "planned_preview": run.get("planned_preview", False),
            "by_condition": by_cond, "cells": cells, "deltas": _deltas(by_cond, cells),
            "traps": _trap_rates(run, measured), "pending": run.get("pending", {}),
            "timeouts": sum(1 for t in trials if t.get("status") == "timeout")}


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
    return None


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 4)


def _deltas(by_cond: dict, cells: dict) -> dict:
    g = lambda c: (by_cond.get(c) or {}).get("rate")  # noqa: E731
    per = {sid: {"cold_to_warm": _delta(row.get("cold", {}).get("rate"), row.get("warm", {}).get("rate")),
                 "warm_to_preloaded": _delta(row.get("warm", {}).get("rate"), row.get("preloaded", {}).get("rate"))}
           for sid, row in cells.items()}
    return {"cold_to_warm": _delta(g("cold"), g("warm")), "warm_to_preloaded": _delta(g("warm"), g("preloaded")),
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


def _tokens(t: dict | None) -> str:
    if not t:
        return "—"
    parts = [f"{k.replace('_', ' ')} {v:,.0f}" for k, v in t.items() if k != "cost_usd" and v is not None]
    if t.get("cost_usd") is not None:
        parts.append(f"${t['cost_usd']:.4f}")
    return " · ".join(parts)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f} pts"


def markdown(agg: dict, d: dict | None = None) -> str:
    conds = list(agg["by_condition"])
    out = [f"# panio-eval run {agg['run_id']}", "",
           f"agent `{agg['agent']}` · N = {agg['n']} · isolation `{agg['isolation']}` · methodology `{agg['methodology']}`"
           + (" · **PREVIEW (planned surface): not a valid result**" if agg.get("planned_preview") else ""), "",
           "## Success rate by condition", "", "| condition | success | core | invent-rate | pass^k | spread | tokens | turns |",
           "|---|---|---|---|---|---|---|---|"]
    for c in conds:
        b = agg["by_condition"][c]
        pk = ", ".join(f"k={k}: {_pct(v)}" for k, v in b["pass_hat_k"].items())
        out.append(f"| {c} | {_pct(b['rate'])} ({b['trials']} trials) | {_pct(b['core_rate'])} | {_pct(b['invent_rate'])} | "
                   f"{pk or '—'} | {b['spread'] if b['spread'] is not None else '—'} | {_tokens(b['tokens'])} | {b['turns'] or '—'} |")
    out += ["", f"Cold→Warm: {_signed(agg['deltas']['cold_to_warm'])} · Warm→Preloaded: {_signed(agg['deltas']['warm_to_preloaded'])}",
            "", "## Per scenario", "", "| scenario | " + " | ".join(conds) + " |", "|---|" + "---|" * len(conds)]
    for sid, row in agg["cells"].items():
        cells = [(_pct(row[c]["rate"]) + f" ({row[c]['passes']}/{row[c]['n']}"
                  + (f", score σ {row[c]['score_std']:.2f}" if row[c]["score_std"] is not None else "") + ")")
                 if row[c]["gap"] is None
                 else f"— ({row[c]['gap']})" for c in conds]
        out.append(f"| {sid} | " + " | ".join(cells) + " |")
    out += ["", "## Traps (failure rate)", "", "| trap | central | failure rate |", "|---|---|---|"]
    for key, row in sorted(agg["traps"].items()):
        out.append(f"| {key} | {'yes' if row['central'] else ''} | {_pct(row['failure_rate'])} ({row['walked']}/{row['decided']}) |")
    if agg["pending"]:
        out += ["", "## Pending (reference needs a command panio lacks)", ""]
        out += [f"- {sid}: {', '.join(m)}" for sid, m in agg["pending"].items()]
    jf = sum(b["judge_parse_failures"] for b in agg["by_condition"].values())
    out += ["", f"Judge parse failures: {jf} · timeouts: {agg['timeouts']}"]
    if d:
        out += ["", f"## Diff vs run {d['previous_run']}" + ("" if d["comparable"] else " (methodology differs: NOT comparable)"), ""]
        out += [f"- {c}: {_signed(v)}" for c, v in d["by_condition"].items()]
        out += [f"- regression {r['scenario']}/{r['condition']}: {_pct(r['before'])} → {_pct(r['after'])}" for r in d["regressions"]]
    return "\n".join(out) + "\n"


def html_report(agg: dict, d: dict | None = None) -> str:
    md = markdown(agg, d)
    rows, body = [], []
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
            continue
        if rows:
            body.append("<table>" + "".join(rows) + "</table>")
            rows = []
        if line.startswith("|---"):
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    if rows:
        body.append("<table>" + "".join(rows) + "</table>")
    style = ("body{font-family:sans-serif;max-width:70em;margin:auto}"
             "td{border:1px solid #ccc;padding:2px 6px}table{border-collapse:collapse}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>panio-eval {html.escape(agg['run_id'])}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
