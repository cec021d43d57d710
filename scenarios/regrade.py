"""``panio-eval regrade RUN.json``: grade a whole run's recorded answers again with the current checker.

A checker change (or a catalog change) makes old numbers incomparable with new ones; running the
agents again costs money and brings new randomness. Every trial's evidence is on disk
(``trials/<id>/``: the harness's event stream, the shim's argv log, the sandbox's lab end state), so
the run can be graded again as it stands: the same answers, today's checker. The new run file keeps
the original's trials (ids, seconds, tokens, statuses) and says where it came from
(``regraded_from``: the run, its file, its methodology and catalog hashes, and how many verdicts
changed); a trial's earlier verdict is kept beside the new one. A judge verdict is kept as the judge
gave it (it read the same transcript) unless ``--judge`` grades again. Trials that were not graded
(a harness error, a limit, a condition not measured) stay as they were.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from scenarios.scenario import EvalUsage


def regrade(path: Path, out: Path | None = None, judge_cmd: str | None = None,
            judge2_cmd: str | None = None) -> tuple[dict, Path]:
    from scenarios import runner
    from scenarios.adapters import adapter
    from scenarios.drift import Guard
    from scenarios.report import catalog_hash, methodology_hash
    from scenarios.mcpmap import add_calls
    from scenarios.sandbox import Sandbox
    from scenarios.scenario import load_all

    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise EvalUsage(f"panio-eval regrade: {path} is not a run.json ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("trials"), list) or "agent" not in data:
        raise EvalUsage(f"panio-eval regrade: {path} is not a run.json (no agent or trials)")
    trials_dir = Path(data.get("trials_dir") or path.parent / "trials")
    by_id = {s.id: s for s in load_all()}
    done = [t for t in data["trials"] if t.get("status") == "done"]
    gone = sorted({t["scenario"] for t in done if t["scenario"] not in by_id})
    if gone:
        raise EvalUsage(f"panio-eval regrade: scenario(s) {', '.join(gone)} of run {data.get('run_id')} are not in "
                        "the catalog any more: their answers cannot be graded again")
    missing = [t["id"] for t in done if not (trials_dir / t["id"] / "stream.jsonl").is_file()]
    if missing:
        raise EvalUsage(f"panio-eval regrade: no recorded answer for {len(missing)} trial(s) under {trials_dir} "
                        f"({', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}): regrade needs the run's "
                        "trials/ directory")
    out = out or path.parent / f"regraded-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    cfg = runner.config_of(data, out)
    cfg.judge_cmd, cfg.judge2_cmd = judge_cmd, judge2_cmd
    guard = Guard()
    surface = guard.planned if cfg.planned else guard.live
    ad = adapter(data["agent"])
    changed: list[dict] = []
    trials = []
    for t in data["trials"]:
        if t.get("status") != "done":
            trials.append(t)
            continue
        sc, root = by_id[t["scenario"]], trials_dir / t["id"]
        raw = (root / "stream.jsonl").read_text()
        box = Sandbox(root, cli=t["condition"] != "mcp")
        ev = add_calls(runner.merge_shim(ad.parse(raw), box.records()), surface)
        graded = runner.score(sc, ev, surface, t["condition"], box, cfg, raw, recorded=t)
        before = {"pass": t.get("pass"), "checker": (t.get("checker") or {}).get("verdict"), "scores": t.get("scores")}
        new = {k: v for k, v in t.items() if k not in ("judge", "judge2", "regraded")}
        new.update(graded, **runner.evidence_fields(ev))
        new["regraded"] = {"before": before}
        if before["pass"] != new["pass"]:
            changed.append({"id": t["id"], "before": before["pass"], "after": new["pass"]})
        trials.append(new)
    head = {k: v for k, v in data.items() if k not in ("trials", "regraded_from")}
    head.update(run_id=uuid.uuid4().hex[:12], methodology=methodology_hash(), catalog=catalog_hash(),
                trials_dir=str(trials_dir.resolve()), judge=judge_cmd or data.get("judge"),
                judge2=judge2_cmd or data.get("judge2"),
                regraded_from={"run_id": data.get("run_id"), "file": str(path.resolve()),
                               "methodology": data.get("methodology"), "catalog": data.get("catalog"),
                               "at": time.time(), "trials": len(done), "verdicts_changed": changed,
                               "judges": "graded again" if judge_cmd or judge2_cmd else "kept as recorded"})
    new_run = {**head, "trials": sorted(trials, key=lambda t: t["id"])}
    (out / "run.json").write_text(json.dumps(new_run, indent=1))
    return new_run, out
