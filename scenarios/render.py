"""A run's report as Markdown and HTML, from one list of blocks (so the two never drift).

What a maintainer acts on comes first: the rates per condition with the
discovery deltas, then per scenario × condition the rate and, for a cell that
failed, *why* (the dimension, trap or end-state assertion, with its evidence)
and *which* commands were invented, then the per-trap failure rates (the
help text to harden), gaps with their reason, harness errors, and the diff
against a previous run. Figures are rounded: whole percents, scores to 0.01.
"""

from __future__ import annotations

import html as _html

Block = tuple  # ("h", level, text) | ("p", text) | ("table", header, rows) | ("list", items)


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def signed(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f} pts"


def ci(c: list | None) -> str:
    """A Wilson (or Newcombe) 95 % interval: "21–94%"; "—" when nothing was measured."""
    if not c:
        return "—"
    if c[0] < 0 or c[1] < 0:
        return f"{100 * c[0]:+.0f} to {100 * c[1]:+.0f} pts"
    return f"{100 * c[0]:.0f}–{100 * c[1]:.0f}%"


def _limits(lim: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((lim or {}).items())) or "0"


def _phk(b: dict) -> str:
    spread = b.get("pass_hat_k_spread") or {}
    parts = []
    for k, v in b["pass_hat_k"].items():
        sp = spread.get(k) or spread.get(str(k)) or {}
        parts.append(f"k={k}: {pct(v)}" + (f" ± {100 * sp['std']:.0f}" if sp.get("std") is not None else ""))
    return ", ".join(parts)


def _tokens(t: dict | None) -> str:
    if not t:
        return "—"
    parts = [f"{k.replace('_', ' ')} {v:,.0f}" for k, v in t.items() if k != "cost_usd" and v is not None]
    if t.get("cost_usd") is not None:
        parts.append(f"${t['cost_usd']:.4f}")
    return " · ".join(parts)


def _cell(c: dict) -> str:
    if c["gap"] is not None:
        return f"— ({c['gap']})"
    text = f"{pct(c['rate'])} ({c['passes']}/{c['n']}"
    if c.get("score_std") is not None:
        text += f", score {c['score_mean']:.2f} ± {c['score_std']:.2f}"
    if c.get("errors"):
        text += f", {c['errors']} harness error(s) not scored"
    if c.get("limits"):
        text += f", {sum(c['limits'].values())} hit a limit ({_limits(c['limits'])}): not scored"
    return text + ")" + (f" [{ci(c['rate_ci'])}]" if c.get("rate_ci") else "")


def blocks(agg: dict, d: dict | None = None) -> list[Block]:
    conds = list(agg["by_condition"])
    par = agg.get("params") or {}
    head = [f"agent `{agg['agent']}`" + (f" (adapter {par['adapter']})" if par.get("adapter") else ""),
            f"model `{agg.get('model') or 'harness default'}`",
            f"harness `{agg.get('harness_version') or 'unknown'}`", f"N = {agg['n']}", f"isolation `{agg['isolation']}`",
            f"methodology `{agg['methodology']}`"]
    if par.get("catalog") or par.get("panio_version"):
        head += [f"catalog `{par.get('catalog') or 'unknown'}`", f"panio `{par.get('panio_version') or 'unknown'}`"]
    if par.get("timeout_s") is not None:
        head += [f"--timeout-s {par['timeout_s']:g}", f"--parallel {par.get('parallel')}", f"--retry {par.get('retry') or 0}"]
    out: list[Block] = [("h", 1, f"panio-eval run {agg['run_id']}"), ("p", " · ".join(head))]
    rg = agg.get("regraded_from")
    if rg:
        import time as _time

        when = _time.strftime("%Y-%m-%d %H:%M UTC", _time.gmtime(rg["at"])) if rg.get("at") else "?"
        out.append(("p", f"REGRADED: the recorded answers of run {rg['run_id']} ({rg.get('file')}), graded again on "
                         f"{when} by the current checker: methodology {rg.get('methodology')} → {agg['methodology']}, "
                         f"catalog {rg.get('catalog') or 'unknown'} → {par.get('catalog') or 'unknown'}; "
                         f"{rg['verdicts_changed']} of {rg.get('trials')} verdict(s) changed; judge verdicts "
                         f"{rg.get('judges')}. No agent ran again."))
        if rg.get("changed"):
            out.append(("list", [f"{c['id']}: {'pass' if c['before'] else 'fail'} → {'pass' if c['after'] else 'fail'}"
                                 for c in rg["changed"]]))
    for r in agg.get("resumed") or []:
        out.append(("p", f"Resumed after an interruption: {r.get('kept')} finished trial(s) kept, {r.get('ran')} run."))
    if agg.get("planned_preview"):
        out.append(("p", "PREVIEW (planned surface): not a valid result"))
    if agg.get("state") == "running":
        out.append(("p", "This run did not finish: only the trials it completed are counted."))
    judges = [f"judge `{j}`" for j in (agg.get("judge"), agg.get("judge2")) if j]
    out.append(("p", "graders: " + (", ".join(["checker", *judges]) if judges else "checker only (no judge ran)")))
    rows = []
    for c in conds:
        b = agg["by_condition"][c]
        pk = ", ".join(f"k={k}: {pct(v)}" for k, v in b["pass_hat_k"].items())
        pk = _phk(b) if "pass_hat_k_spread" in b else pk
        rows.append([c, f"{pct(b['rate'])} ({b['trials']} trials)", ci(b.get("rate_ci")),
                     pct(b["core_rate"]) + (f" [{ci(b['core_rate_ci'])}]" if b.get("core_rate_ci") else ""),
                     pct(b["invent_rate"]) + (f" [{ci(b['invent_rate_ci'])}]" if b.get("invent_rate_ci") else ""), pk or "—",
                     "—" if b["spread"] is None else f"{b['spread']:.2f}", _tokens(b["tokens"]),
                     "—" if b["turns"] is None else f"{b['turns']:.1f}", str(b.get("harness_errors", 0)),
                     _limits(b.get("limits"))])
    d_ = agg["deltas"]
    dl = lambda k: signed(d_.get(k)) + (f" [{ci(d_[k + '_ci'])}]" if d_.get(k + "_ci") else "")  # noqa: E731
    out += [("h", 2, "Success rate by condition"),
            ("table", ["condition", "success", "95% CI", "core", "invent-rate", "pass^k ± std over scenarios", "spread",
                       "tokens", "turns", "harness errors", "limits hit"], rows),
            ("p", f"Cold→Warm: {dl('cold_to_warm')} · Warm→Preloaded: {dl('warm_to_preloaded')}"
                  + (f" · Preloaded CLI→MCP: {dl('cli_to_mcp')}" if "mcp" in conds else "")),
            ("p", "Brackets: the Wilson 95 % interval of a rate (Newcombe's for a delta). A trial that hit a limit "
                  "(time, turns, tokens) or whose harness failed is not scored: it is counted apart, never as a fail.")]
    per = agg["deltas"]["per_scenario"]
    out += [("h", 2, "Per scenario"),
            ("table", ["scenario", *conds, "Cold→Warm", "Warm→Preloaded", *(["CLI→MCP"] if "mcp" in conds else [])],
             [[sid, *[_cell(row[c]) for c in conds], signed(per[sid]["cold_to_warm"]), signed(per[sid]["warm_to_preloaded"]),
               *([signed(per[sid].get("cli_to_mcp"))] if "mcp" in conds else [])]
              for sid, row in agg["cells"].items()])]
    fails = [[f"{sid} {c}", w["what"], f"{w['trials']}/{row[c]['n']}", w["evidence"] or "—", ", ".join(row[c]["invented"]) or "—"]
             for sid, row in agg["cells"].items() for c in conds for w in row[c].get("why") or []]
    if fails:
        out += [("h", 2, "Why cells failed"),
                ("table", ["cell", "failed on", "trials", "evidence", "invented commands"], fails)]
    out += [("h", 2, "Traps (failure rate)"),
            ("table", ["trap", "central", "failure rate"],
             [[k, "yes" if r["central"] else "", f"{pct(r['failure_rate'])} ({r['walked']}/{r['decided']})"
               + (f" [{ci(r['failure_rate_ci'])}]" if r.get("failure_rate_ci") else "")]
              for k, r in sorted(agg["traps"].items())])]
    if agg["pending"]:
        out += [("h", 2, "Pending (reference needs a command panio lacks)"),
                ("list", [f"{sid}: {', '.join(m)}" for sid, m in agg["pending"].items()])]
    jf = sum(b["judge_parse_failures"] for b in agg["by_condition"].values())
    jd = sum(b.get("judge_disagreements", 0) for b in agg["by_condition"].values())
    line = (f"Judge parse failures: {jf} · checker–judge disagreements: {jd} trial(s) · timeouts: {agg['timeouts']}"
            f" · limits hit: {_limits(agg.get('limits'))} · harness retries: {agg.get('retries', 0)}")
    if agg.get("inter_rater"):
        ir = agg["inter_rater"]
        line += f" · second rater: kappa {ir['kappa']:.2f} over {ir['n']} trials"
    out.append(("p", line))
    if d:
        out += [("h", 2, f"Diff vs run {d['previous_run']}" + ("" if d["comparable"] else " (methodology differs: NOT comparable)")),
                ("list", [f"{c}: {signed(v)}" for c, v in d["by_condition"].items()]
                 + [f"regression {r['scenario']}/{r['condition']}: {pct(r['before'])} → {pct(r['after'])}" for r in d["regressions"]])]
    return out


def markdown(agg: dict, d: dict | None = None) -> str:
    lines: list[str] = []
    for b in blocks(agg, d):
        if b[0] == "h":
            lines += ["#" * b[1] + " " + b[2], ""]
        elif b[0] == "p":
            lines += [b[1], ""]
        elif b[0] == "list":
            lines += [f"- {x}" for x in b[1]] + [""]
        else:
            esc = lambda x: str(x).replace("|", "\\|").replace("\n", " ")  # noqa: E731
            lines += ["| " + " | ".join(map(esc, b[1])) + " |", "|" + "---|" * len(b[1])]
            lines += ["| " + " | ".join(map(esc, r)) + " |" for r in b[2]] + [""]
    return "\n".join(lines).rstrip() + "\n"


def html(agg: dict, d: dict | None = None) -> str:
    e = _html.escape
    body: list[str] = []
    for b in blocks(agg, d):
        if b[0] == "h":
            body.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            body.append(f"<p>{e(b[1])}</p>")
        elif b[0] == "list":
            body.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in b[1]) + "</ul>")
        else:
            head = "".join(f"<th>{e(str(h))}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in b[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    style = ("body{font-family:sans-serif;max-width:80em;margin:auto;padding:1em}"
             "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #bbb;padding:3px 8px;text-align:left;"
             "vertical-align:top}th{background:#eee}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>panio-eval {e(agg['run_id'])}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
