"""A finished job for people (summary lines), for CI (exit status) and for test tools (JUnit XML)."""

from __future__ import annotations

from pathlib import Path

from bench_agent.errors import BY_CODE, Canceled, PanioError, TestFailed, Timeout, Unreachable

TYPE_CHECKING = False  # `panio job status` and `job list` need no XML: ElementTree loads with a JUnit file
if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

MARKS = {"pass": "ok  ", "fail": "FAIL", "error": "ERR ", "timeout": "TIME", "skipped": "skip", "running": " .. "}


def ci_error(job: dict) -> PanioError | None:
    """None when every step passed; else the error whose exit status tells CI who failed: board or lab."""
    health, result = job["health"], job["result"]
    where = f"job {job['id']} ({job['name']}) on {job['target']}"
    if job["state"] != "done":  # the run's deadline passed and its runner has not stopped yet
        return Timeout(f"{where}: still {job['state']} at the run's deadline (cancel requested)", job=job["id"],
                       hint=f"see `panio job status {job['id']}`")
    if health == "complete" and result == "passed":
        return None
    if health == "complete":
        failed = [s["name"] for s in job["steps"] if s["status"] == "fail"]
        return TestFailed(f"{where}: the board failed {', '.join(failed) or 'a step'}", job=job["id"],
                          hint=f"see `panio job logs {job['id']}`")
    err = job.get("error") or {}
    if health == "canceled":
        return Canceled(f"{where}: canceled", job=job["id"])
    if health == "timed_out":
        return Timeout(f"{where}: timed out: {job['reason']}", job=job["id"])
    cls = BY_CODE.get(err.get("error", ""), Unreachable)
    if cls in (TestFailed, PanioError):
        cls = Unreachable
    return cls(f"{where}: incomplete (the lab failed): {job['reason']}", job=job["id"],
               hint=err.get("hint") or f"see `panio job logs {job['id']}`")  # what fixes the lab, when it is known


def brief(job: dict) -> dict:
    """The job as `job status --json` prints it: its steps without their output."""
    return {**job, "steps": [{k: v for k, v in s.items() if k != "output"} for s in job.get("steps", [])]}


def summary_lines(job: dict) -> list[str]:
    verdict = job["health"] if job["health"] != "complete" else f"complete, {job['result']}"
    lines = [f"job {job['id']} {job['name']} on {job['target']}: {job['state']}"
             + (f" ({verdict})" if job["state"] == "done" else "")]
    for i, s in enumerate(job["steps"]):
        took = f" {s['duration_s']:.2f}s" if s.get("duration_s") is not None else ""
        lines.append(f"  {MARKS.get(s['status'], s['status'])} {i + 1}. {s['name']}{took}  ({s['command']})")
        lines += [f"         - {c['check']}: {failure(c, s.get('output') or '')}" for c in s.get("checks", [])
                  if not c["ok"]]
    if job.get("reason") and job["state"] == "done":
        lines.append(f"  {job['reason']}")
    return lines


def failure(check: dict, output: str) -> str:
    """What a failed check saw, in words: never a bare `None`."""
    if check.get("error"):
        err = check["error"]
        return str(err.get("message", err) if isinstance(err, dict) else err)
    if check.get("got") is not None:
        return f"got {check['got']!r}"
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), None)
    seen = f"last output line: {last[:120]!r}" if last else "the step printed nothing"
    if check["check"].startswith("output does not match"):
        return "the output matched"
    return f"no match in the output ({seen})"


def junit_suite(job: dict) -> ET.Element:
    import xml.etree.ElementTree as ET

    """One job as a JUnit <testsuite>, one <testcase> per step."""
    cases = job["steps"]
    suite = ET.Element("testsuite", name=f"{job['name']}@{job['target']}", tests=str(len(cases)),
                       failures=str(sum(s["status"] == "fail" for s in cases)),
                       errors=str(sum(s["status"] in ("error", "timeout") for s in cases)),
                       skipped=str(sum(s["status"] == "skipped" for s in cases)),
                       time=f"{sum(s.get('duration_s') or 0 for s in cases):.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("id", "target", "health", "result", "reason"):
        if job.get(key) is not None:  # a job the lab stopped has no result: leave it out, never "None"
            ET.SubElement(props, "property", name=f"panio.job.{key}", value=str(job[key]))
    if job["state"] == "done" and job["health"] != "complete" and not any(
            s["status"] in ("error", "timeout") for s in cases):
        # The lab failed before any step could (lease not obtained, worker lost): say so as an error case.
        case = ET.SubElement(suite, "testcase", classname=f"panio.{job['target']}.{job['name']}", name="(job)")
        ET.SubElement(case, "error", message=f"{job['health']}: {job['reason']}", type=job["health"])
        suite.set("tests", str(len(cases) + 1))
        suite.set("errors", str(int(suite.get("errors")) + 1))
    for s in cases:
        case = ET.SubElement(suite, "testcase", classname=f"panio.{job['target']}.{job['name']}", name=s["name"],
                             time=f"{s.get('duration_s') or 0:.3f}")
        bad = "; ".join(c["check"] for c in s.get("checks", []) if not c["ok"])
        if s["status"] == "fail":
            ET.SubElement(case, "failure", message=bad, type="test_failed").text = s["command"]
        elif s["status"] in ("error", "timeout"):
            ET.SubElement(case, "error", message=f"{s['status']}: {bad}", type=s["status"]).text = s["command"]
        elif s["status"] == "skipped":
            why = job["reason"] if job.get("result") == "skipped" else "an earlier step stopped the job"
            ET.SubElement(case, "skipped", message=f"not run: {why}")
        if s.get("output"):
            ET.SubElement(case, "system-out").text = s["output"]
    return suite


def junit(*jobs: dict, name: str = "panio") -> str:
    import xml.etree.ElementTree as ET

    wrapper = ET.Element("testsuites", name=name)
    for job in jobs:
        wrapper.append(junit_suite(job))
    ET.indent(wrapper)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(wrapper, encoding="unicode") + "\n"


def write_junit(job: dict, path: Path) -> None:
    write_text(path, junit(job, name=job["name"]))


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:  # checked before the run (check_output); this is a disk that filled up since
        from bench_agent.errors import DeviceError

        raise DeviceError(f"cannot write {path}: {exc.strerror or exc}", file=str(path)) from None


def check_output(path: Path | None, flag: str, folder: bool = False) -> None:
    """Refuse an output path panio could not write (`--junit`, `--report`: a file; `--out`: a folder) before
    anything runs, so a job's verdict is never followed by a failure to write it down."""
    import os
    import tempfile

    from bench_agent.errors import UsageError

    if path is None:
        return
    where = path if folder else path.parent
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot create the folder {where}: {exc.strerror or exc}",
                         hint=f"give {flag} a path in a folder you can write", argument=flag) from None
    if not folder and path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; it takes a file name", argument=flag)
    try:  # a real file in the folder: access() says yes for root even where nothing can be created (/proc)
        tempfile.TemporaryFile(dir=where).close()
        writable = folder or not path.exists() or os.access(path, os.W_OK)
    except OSError:
        writable = False
    if not writable:
        raise UsageError(f"{flag} {path}: not writable", hint=f"give {flag} a path in a folder you can write",
                         argument=flag)


def triage_notes(store, jobs: list[dict]) -> dict[int, dict]:
    """The triage of each job the board failed (``bench_agent.triage.compare.notice``), by job id."""
    from bench_agent.triage import compare as triage

    return {j["id"]: triage.notice(store, j["id"]) for j in jobs if j.get("result") == "failed"}


def markdown(*jobs: dict, title: str = "panio report", triage: dict[int, dict] | None = None) -> str:
    """A readable report: a verdict table, then each job's steps with their checks and output; a failed job's
    triage (what changed since its last pass, flaky or not) under its heading."""
    lines = [f"# {title}", "", "| job | target | health | result | reason |", "|---|---|---|---|---|"]
    for j in jobs:
        lines.append(f"| {j['id']} {j['name']} | {j['target']} | {j['health']} | {j['result'] or '-'} | "
                     f"{(j.get('reason') or '').replace('|', '/')} |")
    for j in jobs:
        lines += ["", f"## job {j['id']} {j['name']} on {j['target']}", ""]
        note = (triage or {}).get(j["id"])
        if note:
            flaky = "flaky" if note.get("flaky") else "not flaky"
            lines += [f"**Triage** ({flaky}; `panio job triage {j['id']}`): {note['triage']}", ""]
        for s in j["steps"]:
            took = f", {s['duration_s']:.2f} s" if s.get("duration_s") is not None else ""
            lines.append(f"### {s['idx'] + 1}. {s['name']}: {s['status']}{took}")
            lines += ["", f"`{s['command']}`", ""]
            lines += [f"- {'ok' if c['ok'] else 'FAILED'}: {c['check']}" for c in s.get("checks", [])]
            if s.get("output"):
                lines += ["", *readable(s["output"])]
            lines.append("")
    return "\n".join(lines) + "\n"


def readable(output: str, keep: int = 4000) -> list[str]:
    """A step's output for a person: text as it came (its last ``keep`` characters); a JSON reply (`serial wait`
    prints one) as its short fields on one line and the console text it carries, without the base64 copy of the
    same bytes. JUnit's system-out and `panio job logs` keep the output whole."""
    reply = None
    if output.lstrip().startswith("{"):
        import json

        try:
            reply = json.loads(output)
        except ValueError:
            pass
    if not isinstance(reply, dict):
        return ["```", output.rstrip("\n")[-keep:], "```"]
    short = [f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in reply.items() if k not in ("text", "data_b64") and
             isinstance(v, (str, int, float, bool)) and len(str(v)) <= 60]
    lines = [f"*{', '.join(short)}*"] if short else []
    text = reply.get("text")
    if isinstance(text, str) and text:
        body = text.replace("\r\n", "\n").rstrip("\n")
        lines += ["", "```", ("..." if len(body) > keep else "") + body[-keep:], "```"]
    return lines
