"""The dashboard's bisections (``/bisects``, ``/bisects/ID``): the range shrinking probe by probe, each probe's
job, verdict, why and triage, the bad build's failure, and the first bad build once found. What `panio bisect
status` says, drawn: a bar of the builds (inline SVG, no script) with the good ones, the bad ones and those still
untested, and the same bar, small, after each probe."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bench_agent.errors import NotConfigured

BAR_W, BAR_H, ROW_W, ROW_H = 720, 28, 240, 12
COLOURS = {"good": "#1c7c36", "bad": "#b3261e", "untested": "#c9ced6"}
PAGE = 50  # bisections a page
MAX_ID = 2**63 - 1


def listing(d, request: Request) -> Response:
    from controller.api import bisects

    text = request.query_params.get("before", "")
    before = int(text) if text.isascii() and text.isdigit() and int(text) <= MAX_ID else None
    rows = [bisects.summarize(r) for r in bisects.store().listed(limit=PAGE, before=before)]
    more = rows[-1]["id"] if len(rows) == PAGE else None
    return d.page(request, "bisects.html", bisects=rows, more=more)


def page(d, request: Request, fragment: bool = False) -> Response:
    from controller.api import bisects

    bisect_id = request.path_params["id"]
    try:
        rec = bisects.store().get(bisect_id) if bisect_id <= MAX_ID else None
    except NotConfigured:
        rec = None
    if rec is None:
        return d.page(request, "missing.html", status_code=404, what=f"bisection {bisect_id}")
    v = bisects.view(rec)
    n = len(v["builds"])
    probed = sorted({s["index"] for s in v["steps"]})
    now = bar(n, rec["good"], rec["bad"], probed, BAR_W, BAR_H)
    rows = [{**s, "bar": bar(n, s["good_index"], s["bad_index"], [s["index"]], ROW_W, ROW_H)} for s in v["steps"]]
    return d.page(request, "bisect_live.html" if fragment else "bisect.html", b=v, now=now, rows=rows,
                  failing=failing_job(v))


def failing_job(v: dict) -> int | None:
    """The bad build's first run that failed the way it fails (the failure's evidence): its job id."""
    last = v["builds"][-1]
    return next((p["job_id"] for p in v["probes"] if p["build"] == last and p["verdict"] == "bad"), None)


def bar(n: int, good: int, bad: int, marked: list[int], width: int, height: int) -> dict:
    """Plain numbers for the template's ``<svg>``: builds 0..``good`` green, ``bad``..n-1 red, those between grey
    (untested or not decided), a tick over each build of ``marked``."""
    step = width / n

    def span(first: int, last: int, kind: str) -> dict:
        return {"x": round(first * step, 1), "w": round((last - first + 1) * step, 1), "kind": kind,
                "colour": COLOURS[kind], "count": last - first + 1}

    spans = [span(0, good, "good"), span(bad, n - 1, "bad")]
    if bad - good > 1:
        spans.insert(1, span(good + 1, bad - 1, "untested"))
    ticks = [{"x": round((i + 0.5) * step, 1), "index": i} for i in marked]
    return {"width": width, "height": height, "spans": spans, "ticks": ticks}


def probe_of(job: dict) -> dict | None:
    """The bisection ``job`` was a probe of, for its page's link back: ``bisect_id`` and the build's name."""
    from controller.api import bisects

    store = bisects.store()
    found = store.probe_of(job["id"])
    if found is None:
        return None
    builds = store.get(found["bisect_id"])["builds"]
    return {**found, "build_name": builds[found["build"]]["name"]}
