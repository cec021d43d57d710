"""The runner: scenarios × conditions × N trials of a headless agent, graded.

Isolation per trial (seed §3): a fresh sandbox with its own HOME (no user
CLAUDE.md, memory or history), a fresh empty cwd (not the panio checkout),
a throwaway lab seeded from the scenario's fixture, and the argv shim first on
PATH refusing anything outside the T1-safe set. Trials run in parallel under a
cap, each with a time limit; a trial that overruns is killed (its own process
group) and graded on what it produced.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scenarios import checker, judge, t1
from scenarios.adapters import MCP_CONFIG, Adapter, adapter
from scenarios.drift import Guard
from scenarios.evidence import Command, Evidence
from scenarios.mcpmap import add_calls
from scenarios.sandbox import Sandbox, real_panio
from scenarios.scenario import Interrupted, Scenario

T1_BRIEF = ("Use the `panio` command-line tool (already on PATH; the lab file is set up for you in $PANIO_LAB) "
            "to do this. Finish with a short summary of what you did.")
MCP_BRIEF = ("panio's runtime commands are available to you as MCP tools (server `panio`); there is no panio "
             "command line. Do not touch hardware: give the tool calls you would make, in order, in one fenced code "
             "block, one JSON object per line: {\"tool\": \"NAME\", \"arguments\": {...}}, and say where you learned "
             "each. Read-only tools such as target_list are fine to call.")
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
    model: str | None = None  # the agent's model (passed to the harness, recorded in run.json)
    provider: str | None = None  # pi: --provider (004's reference agent: pi over OpenRouter)
    agent_args: list[str] = field(default_factory=list)  # passed through to the harness as-is
    judge2_cmd: str | None = None  # an optional second rater
    retry: int = 0  # a trial whose harness failed (crashed, could not start) is run again up to this many times
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)  # set when panio-eval is stopped


def prompt_for(sc: Scenario, condition: str = "cold") -> str:
    brief = MCP_BRIEF if condition == "mcp" else (T1_BRIEF if sc.tier == "t1" else T0_BRIEF)
    return f"{sc.goal}\n\n{brief}"


def skill_source(panio: str) -> Path | None:
    """The bundled SKILL.md, from the binary under test (`panio skill --path`)."""
    try:
        p = subprocess.run([panio, "skill", "--path"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    path = Path(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else None
    return path if path and path.exists() else None


@dataclass
class AgentRun:
    out: str
    err: str
    seconds: float
    timed_out: bool
    status: int | None  # the harness's exit status (None: killed at the time limit, or never started)
    start_error: str | None = None  # the harness could not be started at all (no such executable, not executable)


def run_agent(ad: Adapter, sc: Scenario, condition: str, box: Sandbox, cfg: RunConfig,
              skill: Path | None) -> AgentRun:
    """Start the harness headless in the sandbox and wait for it (killed at the time limit)."""
    skill_text = skill.read_text(encoding="utf-8") if skill else ""
    prompt = prompt_for(sc, condition)
    env = box.env() if cfg.isolation == "home" else {**box.env(), "HOME": os.environ.get("HOME", "")}
    env.update(PANIO_EVAL_PROMPT=prompt, PANIO_EVAL_CONDITION=condition, PANIO_EVAL_SCENARIO=sc.id,
               PANIO_EVAL_SKILL=str(skill or ""))
    stdin = ad.stdin(prompt, condition, skill_text)
    mcp_config = box.home / MCP_CONFIG if condition == "mcp" else None
    argv = ad.argv(prompt, condition, skill_text, model=cfg.model, provider=cfg.provider, extra=cfg.agent_args,
                   mcp_config=mcp_config)
    if mcp_config is not None:
        env["PANIO_EVAL_MCP_CONFIG"] = str(mcp_config)
    from bench_agent.process import Child

    try:
        child = Child(argv, cwd=str(box.cwd), env=env, input=stdin.encode() if stdin is not None else None)
    except OSError as exc:
        return AgentRun("", "", 0.0, False, None, start_error=f"{argv[0]}: {exc.strerror or exc}")
    done = child.wait(cfg.timeout_s)
    return AgentRun(done.out, done.err, done.elapsed_s, done.timed_out, None if done.timed_out else done.code)


def limit_hit(run: AgentRun, ad: Adapter, cfg: RunConfig) -> tuple[str, str] | None:
    """The limit this trial stopped at, as (kind, what): ``time`` (killed at ``--timeout-s``), ``turns`` or
    ``tokens`` (the harness says it stopped at its own limit). None: it finished on its own.

    A trial that hit a limit is neither a fail nor a harness error: it is reported as such (status
    ``limit``), never scored, so a cell is not put down to the commands the agent never reached."""
    if run.timed_out:
        return "time", (f"{ad.name} hit the time limit (--timeout-s {cfg.timeout_s:g}) and was killed after "
                        f"{run.seconds:.0f} s")
    from scenarios.adapters import limit_of

    return limit_of(ad.name, run.out, run.status)


def harness_failure(run: AgentRun, ev: Evidence, ad: Adapter) -> str | None:
    """Why this trial measured the harness, not the agent (None: it measured the agent).

    A harness that could not start, exits non-zero, reports an error, or prints no final answer
    did not do the thing: the trial is an error, shown as a gap, never a score (004 §6), and
    ``--retry`` runs it again.
    """
    if run.start_error:
        return f"{ad.name} could not start: {run.start_error}"
    if run.status != 0:
        tail = " ".join(run.err.strip().splitlines()[-2:])[:300]
        return f"{ad.name} exited {run.status}" + (f": {tail}" if tail else "")
    if ev.harness_error:
        return f"{ad.name} reported an error: {ev.harness_error}"
    if not ev.text.strip():
        acted = len(ev.commands) + len(ev.mcp_calls)
        return f"{ad.name} printed no answer" + (f" (after {acted} command(s))" if acted else " and took no action")
    return None


def merge_shim(ev: Evidence, records: list[dict]) -> Evidence:
    """The shim's log is the authority on which panio commands ran and how they exited."""
    if not records:
        return ev
    stated = [c for c in ev.commands if c.source == "stated" or c.hook]
    seen = [c for c in ev.commands if c.source == "run" and not c.hook]
    ran = []
    for r in records:
        c = Command(r["argv"], "run", exit=r.get("exit"), refused=bool(r.get("refused")))
        same = next((i for i, s in enumerate(seen) if s.argv == c.argv), None)
        if same is not None:  # what it printed is the stream's (the shim logs argv and status only)
            c.output = seen.pop(same).output
        ran.append(c)
    ev.commands = ran + stated
    return ev


def trial_id(sc: Scenario, condition: str, index: int) -> str:
    return f"{sc.id}-{condition}-{index}"


def set_aside(root: Path, label: str) -> str | None:
    """Move a trial directory out of the way (an earlier attempt, or one an interrupted run left): kept for
    reading as ``<id>.<label>-N``; returns its path relative to the run directory (None: nothing there)."""
    if not root.exists():
        return None
    n = 1
    while (dest := root.with_name(f"{root.name}.{label}-{n}")).exists():
        n += 1
    root.rename(dest)
    return f"{root.parent.name}/{dest.name}"


def one_trial(sc: Scenario, condition: str, index: int, cfg: RunConfig, guard: Guard, skill: Path | None,
              earlier: list[dict] | None = None) -> dict:
    """A trial, run again while its harness fails (``--retry``): every failed attempt is recorded in
    ``attempts`` with its reason, and its directory kept as ``trials/<id>.attempt-N``. ``earlier``: the
    failed attempts of a run being resumed."""
    root = cfg.out / "trials" / trial_id(sc, condition, index)
    attempts = list(earlier or [])
    set_aside(root, "interrupted")  # a trial an interrupted run had started: its leftovers, kept for reading
    for left in range(cfg.retry, -1, -1):
        rec = attempt(sc, condition, index, cfg, guard, skill)
        if rec["status"] != "error" or left == 0:
            break
        attempts.append({"attempt": len(attempts) + 1, "status": rec["status"], "reason": rec.get("reason"),
                         "seconds": rec.get("seconds"), "exit": rec.get("exit"), "dir": set_aside(root, "attempt")})
    if attempts:
        rec.update(attempt=len(attempts) + 1, attempts=attempts)
    return rec


def attempt(sc: Scenario, condition: str, index: int, cfg: RunConfig, guard: Guard, skill: Path | None) -> dict:
    ad = adapter(cfg.agent)
    tid = trial_id(sc, condition, index)
    box = Sandbox(cfg.out / "trials" / tid, cli=condition != "mcp").create(sc.fixture_lab, guard.groups())
    rec: dict = {"id": tid, "scenario": sc.id, "condition": condition, "trial": index, "tier": sc.tier}
    why_not = ad.register(box.home, condition, skill, box.mcp_server() if condition == "mcp" else None)
    if why_not is None and condition == "preloaded" and skill is None:
        why_not = "panio skill is unavailable (no bundled SKILL.md)"
    if why_not:
        return {**rec, "status": "not_measured", "reason": why_not}
    _link_auth(box.home, cfg.link_auth)
    run = run_agent(ad, sc, condition, box, cfg, skill)
    (box.root / "stream.jsonl").write_text(run.out)
    (box.root / "stderr.txt").write_text(run.err)
    if cfg.stopping.is_set():  # stopped with panio-eval, not by its time limit: neither graded nor a limit
        return {**rec, "status": "interrupted", "seconds": round(run.seconds, 2),
                "reason": "panio-eval was stopped while the agent ran (its process group was stopped): "
                          "`panio-eval run --resume` runs it again"}
    surface = guard.planned if cfg.planned else guard.live
    ev = add_calls(merge_shim(ad.parse(run.out), box.records()), surface)
    from scenarios.adapters import stream_version

    version = stream_version(run.out)
    rec.update(seconds=round(run.seconds, 2), exit=run.status, **({"agent_version": version} if version else {}))
    limit = limit_hit(run, ad, cfg)
    if limit:
        return {**rec, "status": "limit", "limit": limit[0], "reason": limit[1],
                "model": ev.model, "tokens": ev.tokens, "turns": ev.turns}
    failure = harness_failure(run, ev, ad)
    if failure:
        return {**rec, "status": "error", "reason": failure}
    graded = score(sc, ev, surface, condition, box, cfg, run.out)
    return {**rec, "status": "done", **graded, **evidence_fields(ev)}


def evidence_fields(ev: Evidence) -> dict:
    return {"model": ev.model, "tokens": ev.tokens, "turns": ev.turns, "mcp_calls": len(ev.mcp_calls),
            "commands": [{"argv": c.argv, "source": c.source, "exit": c.exit, "refused": c.refused,
                          **({"rejected": True} if c.rejected else {}), **({"hook": True} if c.hook else {})}
                         for c in ev.commands]}


def score(sc: Scenario, ev: Evidence, surface, condition: str, box: Sandbox | None, cfg: RunConfig, raw: str = "",
          recorded: dict | None = None) -> dict:
    """Checker (with the T1 end state), then the judge(s) given the checker's verdict; checker first, disagreements kept.

    ``recorded`` (regrade): a trial as a run recorded it; a judge with no command in ``cfg`` keeps the verdict it
    gave then (it read the same transcript), merged with the checker's new one."""
    t1_res, lab = None, None
    if sc.tier == "t1" and box is not None:
        t1_res = t1.grade(sc, box, surface)
        from scenarios.labcheck import read_lab

        try:
            lab = read_lab(box.lab)
        except (OSError, ValueError):
            lab = None
    res = checker.check(sc, ev, surface, condition, lab=lab)
    scores = dict(res.scores)
    if t1_res is not None:
        scores["d6"] = 2 if t1_res.passed and not res.contradictions else 0  # a claim panio's output belies
    checker_verdict = res.verdict if t1_res is None else (
        "fail" if not t1_res.passed or res.contradictions else checker.verdict(scores, res.traps, condition)[0])
    out: dict = {"checker": {**res.to_json(), "verdict": checker_verdict}, "t1": t1_res.to_json() if t1_res else None}
    jv = None
    for key, cmd in (("judge", cfg.judge_cmd), ("judge2", cfg.judge2_cmd)):
        kept = (recorded or {}).get(key)
        if not cmd and kept:
            v = judge.Verdict(**kept["verdict"]) if kept.get("verdict") else None
            out[key] = {**kept, "kept": True, "alone": judge.alone(v, sc, condition) if v else "undetermined",
                        "disagreements": judge.disagreements(scores, [t.to_json() for t in res.traps], v)}
            jv = jv or v
            continue
        if not cmd:
            continue
        prompt = judge.build_prompt(sc, _transcript(ev, raw), condition, judge.help_tree(real_panio()),
                                    checker={**res.to_json(), "verdict": checker_verdict, "scores": scores})
        jrun = judge.run_judge(cmd, prompt)
        v = jrun.verdict
        out[key] = {"parse_failed": jrun.parse_failed, "error": jrun.error, "verdict": v.to_json() if v else None,
                    "alone": judge.alone(v, sc, condition) if v else "undetermined",
                    "disagreements": judge.disagreements(scores, [t.to_json() for t in res.traps], v)}
        jv = jv or v
    final, traps, passed, reasons = judge.merge(scores, res.traps, jv, condition)
    if t1_res is not None and not t1_res.passed:
        passed, reasons = False, reasons + t1_res.failures
    return {**out, "pass": passed, "reasons": reasons, "scores": final, "traps": traps, "invented": res.invented,
            "why": failed_why(final, traps, res, t1_res) if not passed else []}


def failed_why(scores: dict, traps: list[dict], res, t1_res) -> list[dict]:
    """For a failed trial: each failing dimension (or trap, or end-state assertion) with its evidence."""
    why: list[dict] = []
    if scores.get("d4") == 0:
        why.append({"what": "D4 invented", "evidence": "; ".join(res.invented)[:400]})
    for d, ev_text in (("d3", "; ".join(res.malformed)), ("d6", "missing: " + "; ".join(res.unmatched)),
                       ("d2", "missing: " + "; ".join(res.unmatched))):
        if scores.get(d) == 0:
            why.append({"what": f"{d.upper()} = 0", "evidence": ev_text[:400]})
    for t in traps:
        if t.get("central") and t.get("respected") is False:
            why.append({"what": f"trap {t['id']}", "evidence": str(t.get("evidence", ""))[:400]})
    if t1_res is not None:
        have = {w["what"] for w in why}
        why += [{"what": a.name, "evidence": a.detail[:400]} for a in t1_res.assertions
                if a.counts and not a.passed and a.name not in have]
    return why


def _transcript(ev: Evidence, raw: str, limit: int = 60000) -> str:
    """A readable summary first (commands in order, exits, reads, answer), then the raw event stream."""
    lines = [f"[{c.source}] {c.text}" + (f"  (exit {c.exit})" if c.exit is not None else "")
             + ("  (refused: outside the T1-safe set)" if c.refused else "")
             + ("  (named only to reject it)" if c.rejected else "") + ("  (inside a hook: not run)" if c.hook else "")
             for c in ev.commands]
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


class RunLog:
    """run.json, rewritten after every trial: a killed run keeps the trials it finished (004 §9)."""

    def __init__(self, path: Path, head: dict, trials: list[dict] | None = None) -> None:
        import threading

        self.path, self.head, self.trials, self.lock = path, head, list(trials or []), threading.Lock()
        self.write("running")

    def add(self, trial: dict) -> dict:
        with self.lock:
            self.trials.append(trial)
            self.write("running")
        return trial

    def write(self, state: str) -> dict:
        data = {**self.head, "state": state, "seconds": round(time.time() - self.head["started"], 1),
                "trials": sorted(self.trials, key=lambda t: t["id"])}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.path)
        return data


def harness_version(ad: Adapter) -> str | None:
    """`<harness> --version` (None for a custom command: its --version may mean anything)."""
    if ad.name == "cmd":
        return None
    try:
        p = subprocess.run([ad.exe, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    line = (p.stdout.strip() or p.stderr.strip()).splitlines()[:1]
    return line[0][:200] if p.returncode == 0 and line else None


def panio_version() -> str | None:
    """The version of the panio under test, as its binary reports it (`panio --version`)."""
    try:
        p = subprocess.run([real_panio(), "--version"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired, FileNotFoundError):
        return None
    line = p.stdout.strip().splitlines()[:1]
    return line[0][:200] if p.returncode == 0 and line else None


def provenance(cfg: RunConfig, ad: Adapter) -> dict:
    """What a run was made with, for run.json: its own parameters, and the versions and hashes that decide
    whether two runs compare (the methodology over rubric, catalog and graders; the catalog alone)."""
    from scenarios.report import catalog_hash, methodology_hash

    version = harness_version(ad)
    return {"adapter": ad.name, "agent_command": ad.exe, "agent_version": version, "harness_version": version,
            "panio_version": panio_version(), "panio": real_panio(), "methodology": methodology_hash(),
            "catalog": catalog_hash(), "timeout_s": cfg.timeout_s, "parallel": cfg.parallel, "retry": cfg.retry,
            "n": cfg.n, "model": cfg.model, "provider": cfg.provider, "agent_args": cfg.agent_args,
            "conditions": cfg.conditions, "isolation": cfg.isolation, "link_auth": cfg.link_auth,
            "judge": cfg.judge_cmd, "judge2": cfg.judge2_cmd, "planned_preview": cfg.planned}


def run(scenarios: list[Scenario], cfg: RunConfig, resume_from: dict | None = None) -> dict:
    """Every trial of scenarios × conditions × N. ``resume_from`` (a run.json an interrupted run left): its
    head is kept, the trials it finished are kept and not run again, the rest (and its harness errors) run."""
    guard = Guard()
    drift = guard.run(scenarios)
    pending = {} if cfg.planned else drift.pending
    skill = skill_source(real_panio())
    cfg.out.mkdir(parents=True, exist_ok=True)
    work = [(sc, cond, i) for sc in scenarios if sc.id not in pending
            for cond in cfg.conditions if cond in sc.conditions for i in range(1, cfg.n + 1)]
    ad = adapter(cfg.agent)
    kept: list[dict] = []
    earlier: dict[str, list[dict]] = {}
    if resume_from is None:
        head = {"run_id": uuid.uuid4().hex[:12], "started": time.time(), "agent": cfg.agent, **provenance(cfg, ad),
                "trials_planned": len(work), "scenarios": [s.id for s in scenarios],
                "core": [s.id for s in scenarios if s.core],
                "pending": {k: v for k, v in pending.items() if k in {s.id for s in scenarios}},
                "traps": {s.id: {t.id: t.central for t in s.traps} for s in scenarios}}
    else:
        head = {k: v for k, v in resume_from.items() if k not in ("trials", "state", "seconds")}
        for t in resume_from.get("trials", []):
            if t.get("status") == "interrupted":  # stopped with panio-eval: run again (one_trial sets its dir aside)
                continue
            if t.get("status") == "error":  # a harness error: run again, the failed attempt recorded
                root = cfg.out / "trials" / t["id"]
                earlier[t["id"]] = [*t.get("attempts", []), {
                    "attempt": len(t.get("attempts", [])) + 1, "status": "error", "reason": t.get("reason"),
                    "seconds": t.get("seconds"), "exit": t.get("exit"), "dir": set_aside(root, "attempt")}]
            else:
                kept.append(t)
        done = {t["id"] for t in kept}
        work = [w for w in work if trial_id(*w) not in done]
        head["parallel"], head["retry"] = cfg.parallel, cfg.retry
        head["resumed"] = [*head.get("resumed", []), {"at": time.time(), "kept": len(kept), "ran": len(work)}]
    log = RunLog(cfg.out / "run.json", head, kept)

    def trial(w) -> None:
        if not cfg.stopping.is_set():
            log.add(one_trial(w[0], w[1], w[2], cfg, guard, skill, earlier.get(trial_id(*w))))

    from bench_agent import process

    with process.scope() as children, _stop_on_signals() as stopped:
        pool = ThreadPoolExecutor(max_workers=max(1, cfg.parallel))
        try:  # each trial's children (agent, judge) are the scope's: a stop reaches every one of them
            for f in [pool.submit(contextvars.copy_context().run, trial, w) for w in work]:
                f.result()
        except (KeyboardInterrupt, SystemExit):
            cfg.stopping.set()
            pool.shutdown(wait=False, cancel_futures=True)
            children.stop_all()  # each agent's process group and descendants: TERM, then KILL, reaped
            pool.shutdown(wait=True)  # the trials that were running record themselves as interrupted
            log.write("interrupted")
            raise Interrupted(stopped[0] or signal.SIGINT, log.path,
                              [t["id"] for t in log.trials if t.get("status") == "interrupted"]) from None
        pool.shutdown(wait=True)
    return log.write("complete")


@contextlib.contextmanager
def _stop_on_signals():
    """SIGTERM (and SIGINT) end the run as an exception in the main thread, so its trials can be stopped and
    recorded (SIGTERM's default would end the process at once, its agents left running). Yields a list that
    holds the signal that came."""
    got: list[int | None] = [None]
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    from bench_agent import process

    def on_signal(signum, frame):
        got[0] = got[0] or signum
        if process.defer_signal(signum):
            return
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    before = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield got
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def config_of(head: dict, out: Path, parallel: int | None = None, retry: int | None = None) -> RunConfig:
    """The RunConfig a recorded run was made with (run.json's head)."""
    return RunConfig(agent=head["agent"], conditions=list(head["conditions"]), n=int(head["n"]), out=out,
                     parallel=int(parallel if parallel is not None else head.get("parallel", 2)),
                     timeout_s=float(head.get("timeout_s", 600)), judge_cmd=head.get("judge"),
                     isolation=head.get("isolation", "home"), link_auth=list(head.get("link_auth", [])),
                     planned=bool(head.get("planned_preview")), model=head.get("model"), provider=head.get("provider"),
                     agent_args=list(head.get("agent_args", [])), judge2_cmd=head.get("judge2"),
                     retry=int(retry if retry is not None else head.get("retry", 0)))


def resume(path: Path, parallel: int | None = None, retry: int | None = None) -> tuple[dict, Path]:
    """Continue the run recorded in ``path`` (run.json) in its own directory: the trials it finished are kept,
    not run again; the others (and those whose harness failed) run as it would have run them. Refused when
    this panio-eval would grade them otherwise (another methodology or catalog) or the panio under test is
    another version: one run's trials must compare."""
    from scenarios.report import catalog_hash, methodology_hash
    from scenarios.scenario import EvalUsage, load_all, select

    try:
        data = json.loads(path.read_text())
        head_ok = isinstance(data, dict) and all(k in data for k in ("agent", "conditions", "n", "scenarios"))
    except ValueError as exc:
        raise EvalUsage(f"panio-eval run --resume: {path} is not a run.json ({exc})") from None
    if not head_ok:
        raise EvalUsage(f"panio-eval run --resume: {path} is not a run.json (no agent, conditions, n, scenarios)")
    if data.get("regraded_from"):
        raise EvalUsage(f"panio-eval run --resume: {path} is a regraded run; resume the run it was regraded from")
    now = {"methodology": methodology_hash(), "catalog": catalog_hash(), "panio_version": panio_version()}
    for key, what in (("methodology", "methodology hash"), ("catalog", "catalog hash"), ("panio_version", "panio version")):
        if key in data and data[key] != now[key]:
            raise EvalUsage(f"panio-eval run --resume: run {data.get('run_id')} was made under {what} {data[key]}, "
                            f"this one is {now[key]}: its trials would not compare (start a new run, or regrade it)")
    cfg = config_of(data, path.parent, parallel, retry)
    return run(select(load_all(), data["scenarios"]), cfg, resume_from=data), path.parent
