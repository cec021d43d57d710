"""Triage: what changed between a job that did not pass and the last run of the same job that did.

The baseline is the newest passing run, before this one, of the same job (same
name and job-file content) on the same target; failing that, on a target with
the same tags; failing that, the same job name on the same target with another
job file (the inputs then say the file changed). Against it a triage reports:

* the first step whose verdict differs, and how (exit status, expectation, timeout);
* in that step's output, in the job's serial log and in the step's own window of
  it (the lines received while the step ran: ``started_at`` + duration), the
  first divergent line:
  after ``logalign`` normalised what always changes, the first line of the
  failing run with no counterpart in the passing one, or the first line the
  passing one had and the failing one skipped; a few lines of context from
  both; the lines the passing run had after the failing one stopped (never
  reached); and the first line that came much later than it did before (late);
* the inputs that differ: job file, the target's lab table, panio's version,
  captured variables;
* the screenshots of both runs at the divergent step, and whether they differ.

Plain data in, plain data out (JSON-able): ``panio job triage``, the dashboard,
suite reports and failure notifications all show the same dict.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from bench_agent.errors import UsageError
from bench_agent.triage import logalign

CONTEXT = 3  # lines of context each side of a divergence
LATE_MIN_S = 1.0  # a line counts as late when it came this much later (and 3x later) after its predecessor
SEARCH_MAX = 500  # passing runs looked at for a baseline


def inputs(job_text: str, target_table: dict, tags: list[str], version: str) -> dict:
    """What a job's payload records of its inputs (``controller.jobs.spec.payload``): digests to match on and to
    compare, and the job file itself (its steps already travel in the payload)."""
    table = json.dumps(target_table, sort_keys=True, default=str)
    return {"job_sha256": hashlib.sha256(job_text.encode()).hexdigest(), "job_file": job_text,
            "lab_sha256": hashlib.sha256(table.encode()).hexdigest(), "lab_keys": key_digests(target_table),
            "tags": sorted(tags), "panio": version}


def key_digests(table: dict) -> dict[str, str]:
    """A short digest of each key of the target's table: which keys changed can be said of a job a worker ran,
    whose payload carries no hook or command of the table (``controller.jobs.spec.target_config``)."""
    return {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()[:16]
            for k, v in sorted(table.items())}


@functools.cache
def panio_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("panio")
    except metadata.PackageNotFoundError:
        return "unknown"


def passed(job: dict) -> bool:
    return (job.get("health"), job.get("result")) == ("complete", "passed")


def find_baseline(store, job: dict) -> tuple[dict | None, str]:
    """The passing run to compare ``job`` with, and how it matches (see the module docstring)."""
    mine = (job["spec"].get("inputs") or {})
    sha, tags = mine.get("job_sha256"), set(mine.get("tags") or ())
    same_target = same_tags = same_name = None
    before, seen = job["id"], 0
    while seen < SEARCH_MAX and same_target is None:
        page = store.list_jobs(limit=100, before=before, name=job["name"], health="complete", result="passed")
        if not page:
            break
        for cand in page:
            theirs = cand["spec"].get("inputs") or {}
            same_file = sha is not None and theirs.get("job_sha256") == sha
            if same_file and cand["target"] == job["target"]:
                same_target = cand
                break
            if same_file and same_tags is None and tags and set(theirs.get("tags") or ()) == tags:
                same_tags = cand
            if same_name is None and cand["target"] == job["target"]:
                same_name = cand
        seen += len(page)
        before = page[-1]["id"]
    if same_target is not None:
        return same_target, "same job file, same target"
    if same_tags is not None:
        return same_tags, f"same job file on {same_tags['target']} (same tags: {', '.join(sorted(tags))}); " \
                          f"it never passed on {job['target']}"
    if same_name is not None:
        return same_name, "same job name and target, another job file"
    return None, "no passing run of this job before it"


def triage(store, job_id: int, flaky: dict | None = None, context: int = CONTEXT) -> dict:
    """The triage of job ``job_id`` (any verdict; a passing job is compared with the run before it too)."""
    job = store.job(job_id)
    out: dict[str, Any] = {"job": _brief(job), "baseline": None, "match": None, "step": None, "logs": [],
                           "inputs": {}, "screenshots": [], "first_divergence": None, "flaky": flaky}
    mine = store.list_artifacts(job["id"])  # read once: logs, last words and screenshots
    out["last_words"] = last_words(job, mine)
    base, how = find_baseline(store, job)
    out["match"] = how
    if base is None:
        out["summary"] = summary(out)
        return out
    base = store.job(base["id"])
    out["baseline"] = _brief(base)
    out["step"] = first_step(base, job)
    arts = (store.list_artifacts(base["id"]), mine)
    try:
        rules = logalign.Rules((job["spec"].get("triage") or {}).get("ignore", ()))
        out["logs"] = _log_diffs(arts, base, job, out["step"], rules, context)
    except UsageError as err:  # a pattern `job check` now refuses, or one too slow on these logs
        raise UsageError(f"job {job_id}'s [triage] ignore: {err.message}",
                         hint="fix [triage] ignore in the job file; its later runs are triaged with the fixed one",
                         job=job_id) from None
    out["inputs"] = input_diff(base, job)
    out["screenshots"] = _screenshots(arts, out["step"])
    # The board's own words first (its serial log), then what the step printed about it.
    ranked = sorted((d for d in out["logs"] if d.get("first")), key=lambda d: not d["source"].startswith("serial-"))
    out["first_divergence"] = {**ranked[0]["first"], "source": ranked[0]["source"]} if ranked else None
    out["summary"] = summary(out)
    return out


TIMEOUT_EXIT = 22  # a wait that ran out (panio's exit status for timeout): the prompt never came
LAST_WORDS = 5


def prompt_never_came(step: dict) -> bool:
    """A step that waited for the board and ran out: the step's own timeout, or a wait's (exit 22)."""
    return step["status"] == "timeout" or (step["status"] in ("fail", "error")
                                           and step.get("exit_status") == TIMEOUT_EXIT)


def last_words(job: dict, artifacts: dict) -> dict | None:
    """What the board said last before the step that waited for it in vain: the last lines of its serial log while
    that step ran (else of the whole saved window), else of the text the step received. None when no step of
    ``job`` waited in vain (its failure is then what the step's checks and the divergent lines say)."""
    step = next((s for s in job["steps"] if s["status"] in ("fail", "timeout", "error")), None)
    if step is None or not prompt_never_came(step):
        return None
    for name in sorted(n for n in artifacts if n.startswith("serial-") and n.endswith(".log")):
        lines = artifacts[name].splitlines()
        window = step_window(lines, step) if step.get("started_at") else []
        words = [bare(x).rstrip() for x in (window or lines) if bare(x).strip()]
        if words:
            return {"source": name, "step": step["idx"] + 1, "line": words[-1].strip(), "lines": words[-LAST_WORDS:]}
    words = [x.rstrip() for x in received(step.get("output") or "").splitlines() if x.strip()]
    if words:
        return {"source": f"step {step['idx'] + 1} output", "step": step["idx"] + 1, "line": words[-1].strip(),
                "lines": words[-LAST_WORDS:]}
    return None


def received(output: str) -> str:
    """The board's text in a step's output: a wait's JSON reply's ``text`` (``output`` for a command's), else the
    output itself."""
    try:
        data, _ = json.JSONDecoder().raw_decode(output.lstrip())
    except ValueError:
        return output
    if isinstance(data, dict):
        text = data.get("text", data.get("output"))
        return text if isinstance(text, str) else ""
    return ""


def _brief(job: dict) -> dict:
    return {k: job.get(k) for k in ("id", "name", "target", "state", "health", "result", "reason", "finished_at")}


def first_step(base: dict, job: dict) -> dict | None:
    """The first step whose verdict differs from the passing run's, and how."""
    theirs = {s["idx"]: s for s in base["steps"]}
    for s in job["steps"]:
        p = theirs.get(s["idx"])
        if p is not None and p["status"] == s["status"] and p.get("exit_status") == s.get("exit_status"):
            continue
        failed = [c for c in s.get("checks") or [] if not c.get("ok")]
        how = [c["check"] + (f" (got {c['got']!r})" if c.get("got") is not None else "") for c in failed]
        if s["status"] == "timeout":
            how.insert(0, "timed out")
        if p is not None and p.get("exit_status") != s.get("exit_status") and not any(
                c["check"].startswith("exit status") for c in failed):
            how.append(f"exit status {s.get('exit_status')} (passing run: {p.get('exit_status')})")
        return {"idx": s["idx"], "name": s["name"], "status": s["status"], "exit_status": s.get("exit_status"),
                "passing_status": p["status"] if p else None, "passing_exit_status": p.get("exit_status") if p else None,
                "passing_duration_s": p.get("duration_s") if p else None, "duration_s": s.get("duration_s"),
                "how": how or [f"{s['status']} (passing run: {p['status'] if p else 'no such step'})"]}
    return None


def _log_diffs(arts: tuple[dict, dict], base: dict, job: dict, step: dict | None, rules: logalign.Rules,
               context: int = CONTEXT) -> list[dict]:
    out, mine, theirs = [], None, None
    if step is not None:
        mine = next(s for s in job["steps"] if s["idx"] == step["idx"])
        theirs = next((s for s in base["steps"] if s["idx"] == step["idx"]), None)
        if theirs is not None and (mine.get("output") or theirs.get("output")):
            d = compare(output_lines(theirs.get("output") or ""), output_lines(mine.get("output") or ""), rules,
                        context=context)
            out.append({"source": f"step {step['idx'] + 1} output", **d})
    theirs_art, mine_art = arts
    windows = []
    for name in sorted(n for n in mine_art if n.startswith("serial-") and n.endswith(".log")):
        if name in theirs_art:
            passing, failing = theirs_art[name].splitlines(), mine_art[name].splitlines()
            d = compare(passing, failing, rules, timed=True, context=context, began=(_began(base), _began(job)))
            out.append({"source": name, **d})
            if step is not None and theirs is not None and mine.get("started_at") and theirs.get("started_at"):
                # the same comparison over the step's own window of each run's log (its start to its end)
                d = compare(step_window(passing, theirs), step_window(failing, mine), rules, timed=True,
                            context=context, began=(_began(base), _began(job)))
                windows.append({"source": f"step {step['idx'] + 1} {name}", **d})
    return out + windows


def step_window(lines: list[str], step: dict, margin_s: float = 0.5) -> list[str]:
    """The serial-log lines (``[HH:MM:SS.mmm] #seq text``, local time) received while ``step`` ran: from its
    ``started_at`` to its end (``duration_s``) plus ``margin_s``; a window across midnight wraps."""
    import time

    def clock(t: float) -> float:
        local = time.localtime(t)
        return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + (t % 1)

    start = step["started_at"]
    begin, end = clock(start), clock(start + (step.get("duration_s") or 0) + margin_s)
    out = []
    for line in lines:
        at = _seconds(line)
        if at is not None and ((begin <= at <= end) if begin <= end else (at >= begin or at <= end)):
            out.append(line)
    return out


def output_lines(output: str) -> list[str]:
    """A step's output as lines to compare: a JSON reply at its head (``serial wait``, ``--json``) is unfolded,
    its text fields line by line (a text repeated in a later field once), its numbers (counters, offsets,
    times) as ``<n>``, base64 left out; what follows it (an error's lines) as it is."""
    try:
        data, end = json.JSONDecoder().raw_decode(output.lstrip())
    except ValueError:
        return output.splitlines()
    lines: list[str] = []
    texts: list[str] = []

    def walk(key: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{key}.{k}" if key else k, v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(f"{key}[{i}]", v)
        elif isinstance(value, str):
            if key.endswith("_b64") or (len(value) > 40 and any(value in t for t in texts)):
                return
            texts.append(value)
            parts = value.replace("\r\n", "\n").split("\n")
            lines.extend(parts if len(parts) > 1 else [f"{key}: {value}"])
        elif isinstance(value, bool) or value is None:
            lines.append(f"{key}: {value}")
        else:
            lines.append(f"{key}: <n>")

    walk("", data)
    return lines + output.lstrip()[end:].splitlines()


def compare(passing: list[str], failing: list[str], rules: logalign.Rules | None = None, timed: bool = False,
            context: int = CONTEXT, began: tuple[float | None, float | None] = (None, None)) -> dict:
    """Two runs' lines: the first divergence, context from both, the passing lines never reached, and (``timed``:
    serial-log lines carry their time) the first line that came late. ``began``: when each run's first step
    started (epoch seconds): a wait that began before it is the board sitting idle before the job (its window
    opens with the line it was left at), not a slow boot, and is never called late."""
    rules = rules or logalign.Rules()
    na, nb = logalign.normalise(passing, rules), logalign.normalise(failing, rules)
    blocks = logalign.align(na, nb)
    first = _first(blocks, passing, failing, context, (na, nb))
    out: dict[str, Any] = {"first": first, "never_reached": [], "extra": 0, "missing": 0,
                           "lines": [len(passing), len(failing)]}
    for blk in blocks:
        if blk.tag != "equal":
            out["extra"] += blk.b1 - blk.b0
            out["missing"] += blk.a1 - blk.a0
    last = blocks[-1] if blocks else None
    if last is not None and last.tag in ("delete", "replace"):
        out["never_reached"] = passing[last.a0:last.a0 + 20]
        out["never_reached_count"] = last.a1 - last.a0
    if timed:
        out["late"] = _late(blocks, passing, failing, tuple(_clock(t) for t in began))
    return out


def _first(blocks: list[logalign.Block], a: list[str], b: list[str], context: int,
           normal: tuple[list[str], list[str]]) -> dict | None:
    for n, blk in enumerate(blocks):
        if blk.tag == "equal":
            continue
        if blk.tag == "delete" and (n == 0 or n == len(blocks) - 1):
            continue  # lines before the failing run's window began, or never reached (said apart)
        if n == 0 and _partial_first_line(blk, *normal):
            continue
        if blk.tag in ("insert", "replace"):
            kind, line, at = ("changed" if blk.tag == "replace" else "extra"), b[blk.b0], blk.b0
        else:
            kind, line, at = "missing", a[blk.a0], blk.a0
        return {"kind": kind, "line": line, "text": bare(line), "failing_line_no": blk.b0 + 1,
                "passing_line_no": blk.a0 + 1,
                "instead_of": a[blk.a0] if blk.tag == "replace" else None,
                "failing": _window(b, blk.b0, max(blk.b1, blk.b0 + 1), context),
                "passing": _window(a, blk.a0, max(blk.a1, blk.a0 + 1), context), "at": at}
    return None


def bare(line: str) -> str:
    """A serial-log line without its time and sequence prefix (``[12:00:01.234] #17 ``)."""
    if _seconds(line) is not None and line[14:15] == " " and line[15:16] == "#":
        return line[15:].split(" ", 1)[1] if " " in line[15:] else ""
    return line


def _partial_first_line(blk: logalign.Block, na: list[str], nb: list[str]) -> bool:
    """A log window begins with the line that was unterminated when the job began (a prompt, say): the same
    line with another head is not a divergence."""
    if blk.tag != "replace" or blk.a1 - blk.a0 != 1 or blk.b1 - blk.b0 != 1 or blk.a0 or blk.b0:
        return False
    x, y = na[0].strip(), nb[0].strip()
    return bool(x and y) and (x.endswith(y) or y.endswith(x))


def _window(lines: list[str], start: int, end: int, context: int) -> list[dict]:
    lo, hi = max(0, start - context), min(len(lines), end + context)
    return [{"no": i + 1, "text": lines[i], "mark": start <= i < end} for i in range(lo, hi)]


def _seconds(line: str) -> float | None:
    """The time of a serial-log line (``[HH:MM:SS.mmm] #seq text``), in seconds of its day."""
    if line[13:14] != "]" or line[:1] != "[":  # format_entry's stamp is always 14 characters
        return None
    try:
        return int(line[1:3]) * 3600 + int(line[4:6]) * 60 + float(line[7:13])
    except ValueError:
        return None


def _began(job: dict) -> float | None:
    """When ``job`` began to act on its board: its first step's start (its lease may have come long before)."""
    return min((s["started_at"] for s in job.get("steps") or () if s.get("started_at")), default=None)


def _clock(ts: float | None) -> float | None:
    """Epoch seconds as seconds of the local day (what a serial line's stamp says)."""
    import time

    if ts is None:
        return None
    local = time.localtime(ts)
    return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + (ts % 1)


def _before(line: str, start: float | None) -> bool:
    """Whether ``line`` came before ``start`` (seconds of the day; within 12 h either way, across midnight)."""
    at = _seconds(line)
    return start is not None and at is not None and 0 < (start - at) % 86400 < 43200


def _late(blocks: list[logalign.Block], a: list[str], b: list[str],
          began: tuple[float | None, float | None] = (None, None)) -> dict | None:
    """The first matched line whose wait after the previous matched line grew by ``LATE_MIN_S`` and threefold.
    A wait of a second or more crosses a second on the clock: only those lines are timed (a dense log has
    many lines a second, and this runs over every matched pair)."""
    prev: tuple[int, int] | None = None
    for blk in blocks:
        if blk.tag != "equal":
            continue
        for j in range(blk.b0, blk.b1):
            i = blk.a0 + (j - blk.b0)
            idle = prev is not None and (_before(a[prev[0]], began[0]) or _before(b[prev[1]], began[1]))
            if prev is not None and not idle and b[j][1:9] != b[prev[1]][1:9]:
                ta, tb = _gap(a, prev[0], i), _gap(b, prev[1], j)
                if ta is not None and tb is not None and tb - ta >= LATE_MIN_S and tb >= 3 * max(ta, 0.05):
                    return {"line": b[j], "after": b[prev[1]], "wait_s": round(tb, 3), "passing_wait_s": round(ta, 3),
                            "failing_line_no": j + 1}
            prev = (i, j)
    return None


def _gap(lines: list[str], i: int, j: int) -> float | None:
    t0, t1 = _seconds(lines[i]), _seconds(lines[j])
    if t0 is None or t1 is None:
        return None
    return (t1 - t0) % 86400  # across midnight


def input_diff(base: dict, job: dict) -> dict:
    """The inputs that differ: job file, the target's lab table, panio, captured variables."""
    a, b = base["spec"].get("inputs") or {}, job["spec"].get("inputs") or {}
    out: dict[str, Any] = {}
    if a.get("job_sha256") != b.get("job_sha256"):
        import difflib

        out["job_file"] = list(difflib.unified_diff((a.get("job_file") or "").splitlines(),
                                                    (b.get("job_file") or "").splitlines(),
                                                    f"job {base['id']}", f"job {job['id']}", lineterm="", n=1))
    if a.get("lab_sha256") != b.get("lab_sha256"):
        ta, tb = a.get("lab_keys") or {}, b.get("lab_keys") or {}  # digests: a worker's payload has no table
        if not (ta and tb):  # recorded before panio kept them: the tables, when the runner had them
            ta, tb = base["spec"].get("target_config") or {}, job["spec"].get("target_config") or {}
        keys = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
        out["lab"] = {"changed": keys or ["(the target's table; the worker's copy is not recorded)"]}
    if a.get("panio") != b.get("panio"):
        out["panio"] = {"passing": a.get("panio"), "failing": b.get("panio")}
    cap_a = {k: v for s in base["steps"] for k, v in (s.get("captured") or {}).items()}
    cap_b = {k: v for s in job["steps"] for k, v in (s.get("captured") or {}).items()}
    changed = {k: {"passing": cap_a.get(k), "failing": cap_b.get(k)} for k in sorted(set(cap_a) | set(cap_b))
               if cap_a.get(k) != cap_b.get(k)}
    if changed:
        out["captured"] = changed
    return out


def _screenshots(arts: tuple[dict, dict], step: dict | None) -> list[dict]:
    if step is None:
        return []
    name = f"step-{step['idx'] + 1:02d}.png"
    theirs, mine = arts[0].get(name), arts[1].get(name)
    if mine is None and theirs is None:
        return []
    differ = None if mine is None or theirs is None else _images_differ(theirs, mine)
    return [{"step": step["idx"] + 1, "name": name, "failing": mine is not None, "passing": theirs is not None,
             "differ": differ}]


def _images_differ(a: bytes, b: bytes) -> bool:
    """Pixels, not bytes: more than 0.5 % of them changed by more than a little."""
    if a == b:
        return False
    try:
        import cv2
        import numpy as np

        ia = cv2.imdecode(np.frombuffer(a, np.uint8), cv2.IMREAD_GRAYSCALE)
        ib = cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_GRAYSCALE)
    except ImportError:
        return True
    if ia is None or ib is None or ia.shape != ib.shape:
        return True
    return float((cv2.absdiff(ia, ib) > 24).mean()) > 0.005


def summary(t: dict) -> str:
    """One line: what a notification, a suite report and ``job list`` users read first."""
    words = t.get("last_words")
    said = f"the board's last words: {words['line'][:200]!r}" if words else None
    if t.get("baseline") is None:
        text = f"job {t['job']['id']}: " + (f"{said} (step {words['step']} waited in vain); " if said else "") \
            + t["match"]
    else:
        parts = [f"job {t['job']['id']} vs last pass {t['baseline']['id']}"]
        if said:  # the headline: what the board said, not the wait's JSON (`status: timeout`)
            parts.insert(0, said)
        if t.get("step"):
            s = t["step"]
            parts.append(f"step {s['idx'] + 1} {s['name']!r} {s['status']}: {'; '.join(s['how'])}")
        d = t.get("first_divergence")
        if d and said and not d["source"].startswith("serial-"):
            d = None  # a wait's reply diverging (its status) says less than the board's words
        if d:
            parts.append(f"first divergent line ({d['kind']}): {d.get('text', d['line']).strip()[:200]!r}")
        late = next((x["late"] for x in t.get("logs", []) if x.get("late")), None)
        never = next((x["never_reached"][0] for x in t.get("logs", []) if x.get("never_reached")), None)
        if late:
            parts.append(f"late: {bare(late['line']).strip()[:120]!r} came {late['wait_s']:g} s after the line "
                         f"before it (passing run: {late['passing_wait_s']:g} s)")
        if never and not d:
            parts.append(f"never reached: {bare(never).strip()[:120]!r}")
        if not (d or late or never or said):
            parts.append("no divergent line")
        changed = [k for k in ("job_file", "lab", "panio", "captured") if k in (t.get("inputs") or {})]
        if changed:
            parts.append(f"inputs changed: {', '.join(changed)}")
        text = "; ".join(parts)
    if t.get("flaky") and t["flaky"].get("flaky"):
        text += f"; flaky ({t['flaky']['why']})"
    return text


def notice(store, job_id: int) -> dict:
    """What a failure's notification and a suite report carry: the triage summary, the first divergent line, the
    last pass and the flaky label. Never raises: a triage that cannot be made says why."""
    from bench_agent.triage import flaky

    try:
        job = store.job(job_id)
        label = flaky.for_job(store, job)
        t = triage(store, job_id, label)
    except Exception as exc:  # noqa: BLE001 - a notification goes out even when its triage could not be made
        return {"triage": f"no triage: {type(exc).__name__}: {exc}"}
    first = t.get("first_divergence")
    return {"triage": t["summary"], "first_divergent_line": first.get("text", first["line"]) if first else None,
            "last_pass": (t.get("baseline") or {}).get("id"), "flaky": bool(label.get("flaky")),
            "last_words": (t.get("last_words") or {}).get("line")}
