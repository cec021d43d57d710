"""The runner: scenarios × conditions × N trials of a headless agent, graded.

Isolation per trial (seed §3): a fresh sandbox with its own HOME (no user
CLAUDE.md, memory or history), a fresh empty cwd (not the panio checkout),
a throwaway lab seeded from the scenario's fixture, and the argv shim first on
PATH refusing anything outside the T1-safe set. Trials run in parallel under a
cap, each with a time limit; a trial that overruns is killed (its own process
group) and graded on what it produced.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scenarios import checker, judge, t1
from scenarios.adapters import Adapter, adapter
from scenarios.drift import Guard
from scenarios.evidence import Command, Evidence
from scenarios.sandbox import Sandbox, real_panio
from scenarios.scenario import Scenario

T1_BRIEF = ("Use the `panio` command-line tool (already on PATH; the lab file is set up for you in $PANIO_LAB) "
            "to do this. Finish with a short summary of what you did.")
T0_BRIEF = ("You are working with the `panio` command-line tool (on PATH). Do not touch hardware: give the exact "
            "panio commands you would run, in order, in one fenced code block, and say where you learned each "
            "(help, skill, docs). Read-only panio commands such as --help are fine to run.")


@dataclass
class RunConfig:
    agent: str
    conditions: list[str]
    n: int
    out: Path
    parallel: int = 2
    timeout_s: float = 600
    judge_cmd: str | None = None
    isolation: str = "home"  # home: sandbox HOME (valid results); light: keep the real HOME (smoke test only)
    link_auth: list[str] = field(default_factory=list)  # files under the real HOME to link into the sandbox HOME
    planned: bool = False


def prompt_for(sc: Scenario) -> str:
    return f"{sc.goal}\n\n{T1_BRIEF if sc.tier == 't1' else T0_BRIEF}"


def skill_source(panio: str) -> Path | None:
    """The bundled SKILL.md, from the binary under test (`panio skill --path`)."""
    try:
        p = subprocess.run([panio, "skill", "--path"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    path = Path(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else None
    return path if path and path.exists() else None


def run_agent(ad: Adapter, sc: Scenario, condition: str, box: Sandbox, cfg: RunConfig,
              skill: Path | None) -> tuple[str, str, float, bool]:
    """Start the harness headless in the sandbox; (stdout, stderr, seconds, timed_out)."""
    skill_text = skill.read_text(encoding="utf-8") if skill else ""
    prompt = prompt_for(sc)
    env = box.env() if cfg.isolation == "home" else {**box.env(), "HOME": os.environ.get("HOME", "")}
    env.update(PANIO_EVAL_PROMPT=prompt, PANIO_EVAL_CONDITION=condition, PANIO_EVAL_SCENARIO=sc.id,
               PANIO_EVAL_SKILL=str(skill or ""))
    stdin = ad.stdin(prompt, condition, skill_text)
    from bench_agent.process import Child

    done = Child(ad.argv(prompt, condition, skill_text), cwd=str(box.cwd), env=env,
                 input=stdin.encode() if stdin is not None else None).wait(cfg.timeout_s)
    return done.out, done.err, done.elapsed_s, done.timed_out


def merge_shim(ev: Evidence, records: list[dict]) -> Evidence:
    """The shim's log is the authority on which panio commands ran and how they exited."""
    if not records:
        return ev
    stated = [c for c in ev.commands if c.source == "stated"]
    ev.commands = [Command(r["argv"], "run", exit=r.get("exit"), refused=bool(r.get("refused"))) for r in records] + stated
    return ev


def add_mcp(ev: Evidence, surface) -> Evidence:
    """MCP tool calls become commands (source "mcp") the checker grades like shell ones."""
    from scenarios.mcpmap import mcp_argv

    for call in ev.mcp_calls:
        argv = mcp_argv(surface, call.get("tool", ""), call.get("arguments") if isinstance(call.get("arguments"), dict) else {})
        if argv is not None:
            ev.commands.append(Command(argv, "mcp"))
    return ev


def one_trial(sc: Scenario, condition: str, index: int, cfg: RunConfig, guard: Guard, skill: Path | None) -> dict:
    ad = adapter(cfg.agent)
    tid = f"{sc.id}-{condition}-{index}"
    box = Sandbox(cfg.out / "trials" / tid).create(sc.fixture_lab, guard.groups())
    rec: dict = {"id": tid, "scenario": sc.id, "condition": condition, "trial": index, "tier": sc.tier}
    why_not = ad.register(box.home, condition, skill)
    if why_not is None and condition == "preloaded" and skill is None:
        why_not = "panio skill is unavailable (no bundled SKILL.md)"
    if why_not:
        return {**rec, "status": "not_measured", "reason": why_not}
    _link_auth(box.home, cfg.link_auth)
    out, err, secs, timed_out = run_agent(ad, sc, condition, box, cfg, skill)
    (box.root / "stream.jsonl").write_text(out)
    (box.root / "stderr.txt").write_text(err)
    surface = guard.planned if cfg.planned else guard.live
    ev = add_mcp(merge_shim(ad.parse(out), box.records()), surface)
    res = checker.check(sc, ev, surface, condition)
    scores, traps_checked = dict(res.scores), res.traps
    t1_res = None
    if sc.tier == "t1":
        t1_res = t1.grade(sc, box, surface)
        scores["d6"] = 2 if t1_res.passed else 0
    jv, jrun = None, None
    if cfg.judge_cmd:
        transcript = _transcript(ev, out)
        prompt = judge.build_prompt(sc, transcript, condition, judge.help_tree(real_panio()))
        jrun = judge.run_judge(cfg.judge_cmd, prompt)
        jv = jrun.verdict
    final, traps, passed, reasons = judge.merge(scores, traps_checked, jv, condition)
    if t1_res is not None and not t1_res.passed:
        passed, reasons = False, reasons + t1_res.failures
    return {**rec, "status": "timeout" if timed_out else "done", "seconds": round(secs, 2), "pass": passed,
            "reasons": reasons, "scores": final, "traps": traps, "checker": res.to_json(),
            "t1": t1_res.to_json() if t1_res else None,
            "judge": None if jrun is None else {"parse_failed": jrun.parse_failed, "error": jrun.error,
                                                "verdict": jv.to_json() if jv else None},
            "tokens": ev.tokens, "turns": ev.turns, "mcp_calls": len(ev.mcp_calls),
            "commands": [{"argv": c.argv, "source": c.source, "exit": c.exit, "refused": c.refused} for c in ev.commands]}


def _transcript(ev: Evidence, raw: str, limit: int = 60000) -> str:
    """A readable summary first (commands in order, exits, reads, answer), then the raw event stream."""
    lines = [f"[{c.source}] {c.text}" + (f"  (exit {c.exit})" if c.exit is not None else "")
             + ("  (refused: outside the T1-safe set)" if c.refused else "") for c in ev.commands]
    other = [f"[shell] {s}" for s in ev.shell if "panio" not in s] + [f"[read] {r}" for r in ev.reads]
    body = "\n".join(lines + other) + "\n\nFINAL ANSWER:\n" + ev.text
    room = limit - len(body) - 40
    if raw.strip() and room > 1000:
        tail = raw if len(raw) <= room else "…(truncated)…\n" + raw[-room:]
        body += "\n\nRAW EVENT STREAM:\n" + tail
    return body[:limit]


def _link_auth(home: Path, files: list[str]) -> None:
    real_home = Path(os.path.expanduser("~"))
    for rel in files:
        src, dst = real_home / rel, home / rel
        if src.exists() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src)


def run(scenarios: list[Scenario], cfg: RunConfig) -> dict:
    guard = Guard()
    drift = guard.run(scenarios)
    pending = {} if cfg.planned else drift.pending
    skill = skill_source(real_panio())
    cfg.out.mkdir(parents=True, exist_ok=True)
    work = [(sc, cond, i) for sc in scenarios if sc.id not in pending
            for cond in cfg.conditions if cond in sc.conditions for i in range(1, cfg.n + 1)]
    started = time.time()
    with ThreadPoolExecutor(max_workers=max(1, cfg.parallel)) as pool:
        trials = list(pool.map(lambda w: one_trial(w[0], w[1], w[2], cfg, guard, skill), work))
    from scenarios.report import methodology_hash

    result = {"run_id": uuid.uuid4().hex[:12], "started": started, "seconds": round(time.time() - started, 1),
              "agent": cfg.agent, "conditions": cfg.conditions, "n": cfg.n, "isolation": cfg.isolation,
              "judge": cfg.judge_cmd, "methodology": methodology_hash(), "planned_preview": cfg.planned,
              "scenarios": [s.id for s in scenarios], "core": [s.id for s in scenarios if s.core],
              "pending": {k: v for k, v in pending.items() if k in {s.id for s in scenarios}},
              "traps": {s.id: {t.id: t.central for t in s.traps} for s in scenarios},
              "trials": trials}
    (cfg.out / "run.json").write_text(json.dumps(result, indent=1))
    return result
