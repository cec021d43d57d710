"""The controller's HTTP API for people and CI, served beside the dashboard's pages (docs/ci.md).

Every request carries ``Authorization: Bearer TOKEN``: a token from ``panio token add`` (its scope and allow
list: ``controller.api.tokens``), or one of the dashboard's own tokens (``PANIO_DASHBOARD_TOKEN``: operator,
``PANIO_DASHBOARD_READ_TOKEN``: reader). The dashboard's session cookie does not count here: a cross-site form
could carry it, a header it cannot. JSON in and out; an error is panio's JSON error object (``error``, ``exit``,
``message``, ``hint``) with its HTTP status: 400 bad input (the message `panio job check` gives), 401 no or an
unknown token, 403 refused (revoked, expired, a reader submitting, a target outside the allow list: submitting,
cancelling or reading its jobs; not an operator for leases), 404 no such job, 409 a schedule's name taken, 413 a body over ``MAX_JOB_BYTES``,
503 the lab failed (database, broker).

    POST /api/v1/jobs                      {"toml": "...", "file": "smoke.toml", "target": null, "deadline_s": null}
    GET  /api/v1/jobs?target=&state=&limit=
    POST /api/v1/suites                    {"toml": "...", "file": "nightly.toml", "jobs": {"smoke.toml": "..."}}
    GET  /api/v1/jobs/{id}                 the job, its steps and their output
    POST /api/v1/jobs/{id}/cancel
    GET  /api/v1/jobs/{id}/artifacts       [{"name", "bytes"}]
    GET  /api/v1/jobs/{id}/artifacts/{name}
    POST /api/v1/targets/{name}/break-lease   operators only
    GET  /api/v1/leases?breaks=            operators only: held leases (or recorded breaks), as `panio lease list`
    GET  /api/v1/schedules                 as `panio schedule list`
    GET  /api/v1/bisects?limit=            bisections, newest first (a token with an allow list: its boards' only)
    GET  /api/v1/bisects/{id}              as `panio bisect status ID --json`, plus the range after each probe
    POST /api/v1/schedules                 {"name", "at" | "every", "toml", "file", "jobs"}: submitter on its allow list
    DELETE /api/v1/schedules/{name}        an operator, or a submitter whose allow list covers its suite
    GET  /api/v1/openapi.json              this, as OpenAPI 3.1 (``controller.api.openapi``), without a token
"""

from __future__ import annotations

import json
from functools import partial

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench_agent import outage
from bench_agent.errors import (AlreadyExists, AuthFailed, ConfigInvalid, InvalidName, NotConfigured, PanioError,
                                Refused, UsageError)
from controller.api import MAX_JOB_BYTES
from controller.api import jobs as api_jobs

PREFIX = "/api/v1"
MAX_ID = 2**63 - 1
STATUS = {UsageError: 400, ConfigInvalid: 400, InvalidName: 400, AuthFailed: 401, Refused: 403, AlreadyExists: 409}


def routes(d) -> list[Route]:
    return [
        Route(f"{PREFIX}/jobs", partial(jobs, d), methods=["GET", "POST"], max_body_size=MAX_JOB_BYTES),
        Route(f"{PREFIX}/suites", partial(suites, d), methods=["POST"], max_body_size=MAX_JOB_BYTES),
        Route(f"{PREFIX}/jobs/{{id:int}}", partial(job, d)),
        Route(f"{PREFIX}/jobs/{{id:int}}/cancel", partial(cancel, d), methods=["POST"]),
        Route(f"{PREFIX}/jobs/{{id:int}}/artifacts", partial(artifacts, d)),
        Route(f"{PREFIX}/jobs/{{id:int}}/artifacts/{{name:str}}", partial(artifact, d)),
        Route(f"{PREFIX}/targets/{{name:str}}/break-lease", partial(break_lease, d), methods=["POST"]),
        Route(f"{PREFIX}/leases", partial(leases, d)),
        Route(f"{PREFIX}/schedules", partial(schedules, d), methods=["GET", "POST"], max_body_size=MAX_JOB_BYTES),
        Route(f"{PREFIX}/schedules/{{name:str}}", partial(schedule, d), methods=["DELETE"]),
        Route(f"{PREFIX}/bisects", partial(bisects, d)),
        Route(f"{PREFIX}/bisects/{{id:int}}", partial(bisect, d)),
        Route(f"{PREFIX}/openapi.json", openapi),
    ]


def token(d, request: Request) -> dict:
    """The caller's token record (scope, allow list), or ``AuthFailed`` / ``Refused``."""
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer ") or not header[7:].strip():
        raise AuthFailed("no token: send Authorization: Bearer TOKEN",
                         hint="make one on the controller with `panio token add NAME --scope ...` (docs/ci.md)")
    secret = header[7:].strip()
    role = d.auth.role_for_token(secret) if d.auth.tokens else None
    if role is not None:  # the dashboard's own tokens work here too
        return {"name": f"dashboard {role}", "scope": role, "targets": [], "tags": []}
    from controller.api.tokens import TokenStore

    return TokenStore().check(secret)


def _error(err: PanioError, status: int | None = None) -> JSONResponse:
    if status is None and isinstance(err, NotConfigured):
        status = 404 if {"job", "artifact", "bisect"} & err.details.keys() else 400
    status = status or next((code for cls, code in STATUS.items() if isinstance(err, cls)), 503)
    if isinstance(err, NotConfigured) and "job" in err.details:  # never the database's URL (a password may be in it)
        err = NotConfigured(f"no job {err.details['job']}", hint="see GET /api/v1/jobs", job=err.details["job"])
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(err.to_json(), status_code=status, headers=headers)


def _not_away(err: PanioError) -> PanioError:
    """``err``, unless it says one of the lab's own services is away (Redis, the results database): that is raised
    for the app's watch, which answers 503 saying since when, with ``Retry-After`` (``unreachable``)."""
    if outage.service_down(err) is not None:
        raise err
    return err


async def _answer(d, request: Request, func, caller: dict | None = None) -> Response:
    """``func(token)`` in the thread pool, its result as JSON, a ``PanioError`` as its status."""
    try:
        caller = caller or await run_in_threadpool(token, d, request)
        result = await run_in_threadpool(func, caller)
    except PanioError as err:
        return _error(_not_away(err))
    return result if isinstance(result, Response) else JSONResponse(result)


async def _with_body(d, request: Request, work) -> Response:
    """``work(token, body)`` for a caller whose token holds, the body read only then (a stranger's megabyte
    is never read)."""
    try:
        caller = await run_in_threadpool(token, d, request)
    except PanioError as err:
        return _error(_not_away(err))
    body = await _body(request)
    if isinstance(body, Response):
        return body
    return await _answer(d, request, lambda t: work(t, body), caller)


def _job_id(request: Request) -> int:
    job_id = request.path_params["id"]
    if job_id > MAX_ID:
        raise NotConfigured(f"no job {job_id}", job=job_id)
    return job_id


async def jobs(d, request: Request) -> Response:
    if request.method == "GET":
        return await _list(d, request)
    return await _with_body(d, request, lambda t, body: _submitted(api_jobs.submit(d.load_lab(), t, body)))


async def suites(d, request: Request) -> Response:
    return await _with_body(d, request, lambda t, body: JSONResponse(api_jobs.submit_suite(d.load_lab(), t, body),
                                                                      status_code=201))


async def _list(d, request: Request) -> Response:
    q = request.query_params
    limit = q.get("limit", "50")
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= 500:  # isdigit() alone takes "²"
        return _error(UsageError("limit must be a whole number from 1 to 500"))
    state = q.get("state") or None
    if state not in (None, "queued", "running", "done"):
        return _error(UsageError("state must be queued, running or done"))
    return await _answer(d, request, lambda t: api_jobs.listed(d.load_lab, t, q.get("target") or None, state,
                                                               int(limit)))


async def _body(request: Request):
    """The request's JSON, or the error response (413, 400) to send instead."""
    too_large = UsageError(f"the body is over {MAX_JOB_BYTES} bytes; a job file is not this large")
    length = request.headers.get("content-length", "")
    if length.isascii() and length.isdigit() and int(length) > MAX_JOB_BYTES:
        return _error(too_large, status=413)  # said before a byte of it is read
    try:
        return json.loads(await request.body())
    except (ValueError, UnicodeDecodeError) as exc:
        return _error(UsageError(f"the body is not JSON: {exc}"))
    except Exception as exc:  # the route's max_body_size, on a body sent without its length
        if not _too_large(exc):
            raise
        return _error(too_large, status=413)


def _too_large(exc: BaseException) -> bool:
    """Whether ``exc`` is Starlette's 413, raised as it is or in a group (through ``BaseHTTPMiddleware``)."""
    if isinstance(exc, HTTPException):
        return exc.status_code == 413
    return isinstance(exc, BaseExceptionGroup) and any(_too_large(e) for e in exc.exceptions)


def _submitted(queued: dict) -> Response:
    return JSONResponse(queued, status_code=201, headers={"Location": f"{PREFIX}/jobs/{queued['job_id']}"})


async def job(d, request: Request) -> Response:
    return await _answer(d, request, lambda t: api_jobs.read(d.load_lab, t, _job_id(request)))


async def cancel(d, request: Request) -> Response:
    return await _answer(d, request,
                         lambda t: {"message": api_jobs.cancel(d.load_lab(), t, _job_id(request))})


async def artifacts(d, request: Request) -> Response:
    def listing(t) -> list[dict]:
        items = api_jobs.artifacts(d.load_lab, t, _job_id(request))
        return [{"name": n, "bytes": len(c) if isinstance(c, bytes) else len(c.encode())} for n, c in items.items()]

    return await _answer(d, request, listing)


async def artifact(d, request: Request) -> Response:
    def content(t) -> Response:
        name = request.path_params["name"]
        items = api_jobs.artifacts(d.load_lab, t, _job_id(request))
        if name not in items:
            raise NotConfigured(f"job {request.path_params['id']} has no artifact {name!r}", artifact=name)
        data = items[name]
        return Response(data if isinstance(data, bytes) else data.encode(), media_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    return await _answer(d, request, content)


async def break_lease(d, request: Request) -> Response:
    """An operator breaks a target's lease, as `panio lease break` and the dashboard's button do (recorded)."""
    def act(t) -> Response | dict:
        target = request.path_params["name"]
        if t["scope"] != "operator":
            raise Refused(f"token {t['name']!r} is a {t['scope']}: only an operator may break a lease",
                          token=t["name"])
        if target not in d.load_lab().targets:
            return _error(NotConfigured(f"no target {target!r} in the controller's lab", target=target), status=404)
        from controller.dashboard.reads import break_lease as break_

        return {"message": break_(target, f"api ({t['name']})")}

    return await _answer(d, request, act)


async def leases(d, request: Request) -> Response:
    """The lab's held leases (``?breaks=1``: the recorded breaks), as `panio lease list` shows them: operators only."""
    from controller.api import schedules as api_schedules

    breaks = request.query_params.get("breaks", "") not in ("", "0")
    return await _answer(d, request, lambda t: api_schedules.leases(t, lambda: d.load_lab().key, breaks))


async def schedules(d, request: Request) -> Response:
    from controller.api import schedules as api_schedules

    if request.method == "GET":
        return await _answer(d, request, lambda _t: api_schedules.listed())
    return await _with_body(d, request, lambda t, body: JSONResponse(api_schedules.add(d.load_lab(), t, body),
                                                                      status_code=201))


async def schedule(d, request: Request) -> Response:
    from controller.api import schedules as api_schedules

    return await _answer(d, request, lambda t: {"message": api_schedules.remove(d.load_lab(), t,
                                                                                 request.path_params["name"])})


async def bisects(d, request: Request) -> Response:
    """Bisections, newest first, as the dashboard's /bisects lists them (a reader's, like jobs)."""
    from controller.api import bisects as api_bisects

    limit = request.query_params.get("limit", "50")
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= 500:  # isdigit() alone takes "²"
        return _error(UsageError("limit must be a whole number from 1 to 500"))
    return await _answer(d, request, lambda t: api_bisects.listed(d.load_lab, t, int(limit)))


async def bisect(d, request: Request) -> Response:
    """One bisection, as `panio bisect status ID --json`, plus ``steps``: the range after each judged probe."""
    from controller.api import bisects as api_bisects

    def read(t) -> dict:
        bisect_id = request.path_params["id"]
        if bisect_id > MAX_ID:
            raise NotConfigured(f"no bisection {bisect_id}", bisect=bisect_id)
        return api_bisects.read(d.load_lab, t, bisect_id)

    return await _answer(d, request, read)


async def openapi(request: Request) -> Response:
    """The API's description: public, like any API reference (it holds no lab data)."""
    from controller.api.openapi import describe

    return JSONResponse(describe())
