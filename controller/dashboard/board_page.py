"""A board's own page (``/targets/NAME``): its jobs with their durations, the suite runs it took part in as units,
its health timeline, its failure rate, its last good job and a trend chart (inline SVG: no script, no framework).

What LAVA shows per device and Jenkins per job: how this board has been doing, not only its last job.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

JOBS = 100  # the board's newest jobs the page reads (its rates and chart are over these)
CHART_W, CHART_H, BAR_GAP = 720, 120, 2
COLOURS = {"passed": "#1c7c36", "failed": "#b3261e", "lab": "#8a5a00", "running": "#7a8594"}


def page(d, request: Request) -> Response:
    from bench_agent.errors import PanioError
    from controller.lab.schema import NAME_RE

    name = request.path_params["name"]
    if not NAME_RE.match(name):
        return PlainTextResponse("not a target name", status_code=404)
    lab = d.load_lab()
    if name not in lab.targets:
        return d.page(request, "missing.html", status_code=404, what=f"target {name}")
    store = d.store()
    jobs = [with_duration(j) for j in store.list_jobs(limit=JOBS, target=name)]
    try:
        from bench_agent.health.state import HealthStore
        from controller import backends

        health = HealthStore(backends.results_url()).history(name, limit=50)
    except PanioError:
        health = []
    return d.page(request, "board.html", board=name, config=lab.targets[name], jobs=jobs, stats=stats(jobs),
                  suites=suite_runs(jobs), health=health, chart=chart(jobs))


def outcome(job: dict) -> str:
    """passed, failed (the board's verdict), lab (the lab failed: incomplete, timed out, canceled) or running."""
    if job["state"] != "done":
        return "running"
    if job.get("health") == "complete":
        return "passed" if job.get("result") == "passed" else "failed"
    return "lab"


def with_duration(job: dict) -> dict:
    """The job with ``duration_s``: from its start (or creation) to its end; None while it runs."""
    start = job.get("started_at") or job.get("created_at")
    end = job.get("finished_at")
    return {**job, "outcome": outcome(job), "duration_s": (end - start) if end and start else None,
            "waited_s": (job["started_at"] - job["created_at"]) if job.get("started_at") else None}


def stats(jobs: list[dict]) -> dict:
    """Failure rate over the board's judged jobs (the lab's failures counted apart) and its last good job."""
    done = [j for j in jobs if j["outcome"] != "running"]
    judged = [j for j in done if j["outcome"] in ("passed", "failed")]
    failed = sum(j["outcome"] == "failed" for j in judged)
    durations = sorted(j["duration_s"] for j in done if j["duration_s"] is not None)
    return {"jobs": len(jobs), "judged": len(judged), "failed": failed, "lab_failed": len(done) - len(judged),
            "failure_rate": failed / len(judged) if judged else None,
            "last_good": next((j for j in jobs if j["outcome"] == "passed"), None),
            "median_duration_s": durations[len(durations) // 2] if durations else None}


def suite_runs(jobs: list[dict]) -> list[dict]:
    """The suite runs among ``jobs`` (newest first), each one unit: its jobs on this board, verdicts, duration."""
    runs: dict[str, dict] = {}
    for j in jobs:
        suite = (j.get("spec") or {}).get("suite")
        if not isinstance(suite, dict) or not suite.get("run"):
            continue
        run = runs.setdefault(suite["run"], {"name": suite.get("name", "?"), "run": suite["run"], "jobs": []})
        run["jobs"].append(j)
    out = []
    for run in runs.values():
        js = run["jobs"]
        starts = [j.get("started_at") or j["created_at"] for j in js]
        ends = [j["finished_at"] for j in js if j.get("finished_at")]
        over = len(ends) == len(js)
        out.append({**run, "jobs": sorted(js, key=lambda j: j["id"]), "started_at": min(starts),
                    "duration_s": (max(ends) - min(starts)) if over else None, "running": not over,
                    "passed": sum(j["outcome"] == "passed" for j in js),
                    "failed": sum(j["outcome"] == "failed" for j in js),
                    "lab": sum(j["outcome"] == "lab" for j in js)})
    return sorted(out, key=lambda r: -r["started_at"])


def chart(jobs: list[dict]) -> dict:
    """The trend, oldest job left: one bar a job, its height its duration, its colour its outcome.
    Plain numbers for the template's ``<svg>`` (no script)."""
    shown = [j for j in reversed(jobs)]
    if not shown:
        return {"bars": [], "width": CHART_W, "height": CHART_H, "max_s": 0}
    longest = max((j["duration_s"] or 0) for j in shown) or 1.0
    step = CHART_W / len(shown)
    bars = []
    for i, j in enumerate(shown):
        h = max(3.0, (j["duration_s"] or 0) / longest * (CHART_H - 14))
        bars.append({"x": round(i * step, 1), "w": round(max(step - BAR_GAP, 1), 1), "y": round(CHART_H - h, 1),
                     "h": round(h, 1), "colour": COLOURS[j["outcome"]], "id": j["id"], "outcome": j["outcome"],
                     "duration_s": j["duration_s"]})
    return {"bars": bars, "width": CHART_W, "height": CHART_H, "max_s": longest}
