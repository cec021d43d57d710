"""The dashboard's triage page of a job (``/jobs/ID/triage``): what ``panio job triage ID`` says, with both runs'
log excerpts side by side and the two screenshots at the divergent step."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from bench_agent.errors import NotConfigured, UsageError


def page(d, request: Request) -> Response:
    from bench_agent.triage import flaky
    from bench_agent.triage import compare as triage

    job_id = request.path_params["id"]
    store = d.store()
    try:
        job = store.job(job_id) if job_id < 2**63 else None
    except NotConfigured:
        job = None
    if job is None:
        return d.page(request, "missing.html", status_code=404, what=f"job {job_id}")
    try:  # bounded: the job's [triage] ignore patterns are checked, then matched with a time limit
        t = triage.triage(store, job_id, flaky.for_job(store, job))
    except UsageError as err:  # one of them is refused: say which, as `panio job triage` does
        return PlainTextResponse(f"panio: {err.message} ({err.hint})", status_code=422)
    return d.page(request, "triage.html", t=t, job=job)
