"""The dashboard's web app (Starlette): server-rendered pages, htmx for live parts, no build step.

Every handler is a plain function (Starlette runs it in its thread pool, so
a slow database or broker never blocks the event loop). Pages that change
while a job runs re-fetch their live fragment with htmx until the job is done.
"""

from __future__ import annotations

import base64
import time
from functools import partial
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from bench_agent.errors import NotConfigured, PanioError
from controller.dashboard import api, bisect_page, board_page, reads, serial_page, triage_page, unreachable
from controller.dashboard.auth import COOKIE, Auth
from controller.dashboard.bodylimit import BodyLimit
from controller.dashboard.guard import Guard

HERE = Path(__file__).parent
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
PUBLIC = ("/login", "/static/")
PAGE = 50  # jobs a page
MAX_ID = 2**63 - 1  # the largest job id a results database (SQLite, PostgreSQL BIGINT) can hold
MAX_BODY_BYTES = 64 * 1024  # a page's form (a route may have its own bound: the controller API's job files)
HEADERS = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store",
           "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'"}


class Dashboard:
    """The lab it shows, the stores it reads and who may do what."""

    def __init__(self, load_lab, auth: Auth) -> None:
        self.load_lab, self.auth = load_lab, auth
        self._stores: dict[str, object] = {}
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters["when"] = _when
        self.templates.env.filters["duration"] = _duration
        self.templates.env.globals["verdict"] = _verdict
        from controller.jobs.report import failure

        self.templates.env.globals["failure"] = failure

    def store(self):
        """One results store per database for the life of the server: a page a second must not build new
        SQLAlchemy tables each time (each new table fills the engine's statement cache anew)."""
        from controller import backends

        url = backends.results_url()
        if url not in self._stores:
            self._stores[url] = backends.results_store()
        return self._stores[url]

    def page(self, request: Request, name: str, status_code: int = 200, **context) -> HTMLResponse:
        cookie = request.cookies.get(COOKIE)
        context.update(role=request.state.role, csrf=self.auth.csrf(cookie), open=self.auth.open)
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)


def build(load_lab, auth: Auth | None = None) -> Starlette:
    d = Dashboard(load_lab, auth or Auth.from_env())
    reads.ping_soon()  # the first page finds the workers' answer (or its ping under way), see reads.workers
    routes = [
        Route("/", partial(overview, d)),
        Route("/login", partial(login, d), methods=["GET", "POST"]),
        Route("/logout", partial(logout, d), methods=["POST"]),
        Route("/queue", partial(queue, d)),
        Route("/jobs", partial(jobs, d)),
        Route("/jobs/{id:int}", partial(job, d)),
        Route("/jobs/{id:int}/live", partial(job, d, fragment=True)),
        Route("/jobs/{id:int}/serial", partial(serial, d)),
        Route("/jobs/{id:int}/triage", partial(triage_page.page, d)),
        Route("/jobs/{id:int}/serial/live", partial(serial, d, fragment=True)),
        Route("/jobs/{id:int}/artifacts/{name:str}", partial(artifact, d)),
        Route("/jobs/{id:int}/cancel", partial(cancel, d), methods=["POST"]),
        Route("/jobs/{id:int}/rerun", partial(rerun, d), methods=["POST"]),
        Route("/targets/{name:str}", partial(board_page.page, d)),
        Route("/targets/{name:str}/break-lease", partial(break_lease, d), methods=["POST"]),
        Route("/targets/{name:str}/health", partial(set_health, d), methods=["POST"]),
        Route("/schedules", partial(schedules, d)),
        Route("/bisects", partial(bisect_page.listing, d)),
        Route("/bisects/{id:int}", partial(bisect_page.page, d)),
        Route("/bisects/{id:int}/live", partial(bisect_page.page, d, fragment=True)),
        *api.routes(d),  # the controller API for people and CI: bearer tokens of its own (docs/ci.md)
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    watch = unreachable.Watch(HEADERS, api.PREFIX)  # the database or Redis away: 503 saying since when, never a 500

    def lab_failed(request: Request, err: PanioError) -> Response:
        """The database, Redis or the lab file failed: say so on the page (and keep serving), no traceback."""
        if watch.outages.failed(err):
            return watch.response(request)
        text = f"panio: {err.message}" + (f" ({err.hint})" if err.hint else "")
        return PlainTextResponse(text, status_code=503, headers=HEADERS)

    # A form or token larger than MAX_BODY_BYTES is not one of ours: refused before it is read (bodylimit.py).
    return Starlette(routes=routes, middleware=[Middleware(BodyLimit, routes=routes, max_bytes=MAX_BODY_BYTES),
                                                Middleware(Guard, auth=d.auth, watch=watch, headers=HEADERS,
                                                           api_prefix=api.PREFIX, public=PUBLIC)],
                     exception_handlers={PanioError: lab_failed, **watch.handlers()})


def overview(d: Dashboard, request: Request) -> Response:
    lab = d.load_lab()
    store = d.store()
    return d.page(request, "overview.html", hosts=reads.hosts(lab), targets=reads.targets(lab, store),
                  queue=reads.queue(store), message=_message(d, request))


def queue(d: Dashboard, request: Request) -> Response:
    """The overview's queue, refreshed in place every few seconds."""
    return d.page(request, "queue_live.html", queue=reads.queue(d.store()))


async def login(d: Dashboard, request: Request) -> Response:
    if request.method == "GET" and "token" in request.query_params and not d.auth.open:
        return _token_exchange(d, request)
    if request.method == "GET":
        return d.templates.TemplateResponse(request, "login.html", {"error": None, "open": d.auth.open})
    form = await request.form()
    role = d.auth.role_for_token(str(form.get("token", ""))) if not d.auth.open else None
    if role is None:
        return d.templates.TemplateResponse(request, "login.html", {"error": "wrong token", "open": d.auth.open},
                                            status_code=401)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, d.auth.session(role), httponly=True, samesite="strict", path="/")
    return response


def _token_exchange(d: Dashboard, request: Request) -> Response:
    """``/login?token=T&next=/path``: a browser that cannot fill a form or send a header (a headless one, a
    kiosk) trades its token for a session cookie and is sent on to ``next`` (a path of this dashboard), so the
    token is left in no address bar, history or later Referer (the dashboard logs no request lines)."""
    role = d.auth.role_for_token(request.query_params.get("token", ""))
    if role is None:
        return d.templates.TemplateResponse(request, "login.html", {"error": "wrong token", "open": d.auth.open},
                                            status_code=401)
    wanted = request.query_params.get("next", "/")
    local = wanted.startswith("/") and not wanted.startswith(("//", "/\\")) and wanted.isprintable()
    response = RedirectResponse(wanted if local else "/", status_code=303)
    response.set_cookie(COOKIE, d.auth.session(role), httponly=True, samesite="strict", path="/")
    return response


async def logout(d: Dashboard, request: Request) -> Response:
    d.auth.end(request.cookies.get(COOKIE))  # the server forgets the session: a copy of the cookie is worth nothing
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def jobs(d: Dashboard, request: Request) -> Response:
    filters = {k: request.query_params.get(k, "") for k in reads.JOB_FILTERS}
    before = _int(request.query_params.get("before"))
    limit = min(max(_int(request.query_params.get("limit")) or PAGE, 1), 500)
    found = reads.jobs(d.store(), filters, limit=limit, before=before)
    more = found[-1]["id"] if len(found) == limit else None
    return d.page(request, "jobs.html", jobs=found, filters=filters, more=more, limit=limit)


def _job_or_404(d: Dashboard, job_id: int) -> dict | None:
    if job_id > MAX_ID:  # no such job, and more than the database's integer holds
        return None
    try:
        return reads.job(d.store(), job_id)
    except NotConfigured:
        return None


def job(d: Dashboard, request: Request, fragment: bool = False) -> Response:
    found = _job_or_404(d, request.path_params["id"])
    if found is None:
        return d.page(request, "missing.html", status_code=404, what=f"job {request.path_params['id']}")
    images = [n for n in found["artifacts"] if Path(n).suffix.lower() in IMAGE_TYPES]
    return d.page(request, "job_live.html" if fragment else "job.html", job=found, images=images,
                  message=_message(d, request), probe=None if fragment else bisect_page.probe_of(found))


def serial(d: Dashboard, request: Request, fragment: bool = False) -> Response:
    found = _job_or_404(d, request.path_params["id"])
    if found is None:
        return d.page(request, "missing.html", status_code=404, what=f"job {request.path_params['id']}")
    logs, note = reads.serial_log(d.load_lab(), found), None
    if found["state"] == "done" and reads.runner_died(found):  # it saved none: the capture held the window
        if not logs:  # not kept as it was settled (a host's worker settled it, or the host was away): read only
            logs = reads.capture_window(d.load_lab(), found)
        note = "read from the target's capture over the job's window: its runner saved none (it died)"
    paged = serial_page.view(logs, found["steps"], request.query_params) if found["state"] != "running" else None
    return d.page(request, "serial_live.html" if fragment else "serial.html", job=found, logs=logs, paged=paged,
                  note=note)


def artifact(d: Dashboard, request: Request) -> Response:
    found = _job_or_404(d, request.path_params["id"])
    name = request.path_params["name"]
    if found is None or name not in found["artifacts"]:
        return PlainTextResponse("no such artifact", status_code=404)
    content = found["artifacts"][name]
    kind = IMAGE_TYPES.get(Path(name).suffix.lower())
    if kind:  # the results store hands image artifacts back as bytes (it keeps them base64 in a text column)
        if isinstance(content, bytes):
            return Response(content, media_type=kind)
        try:
            return Response(base64.b64decode(content, validate=True), media_type=kind)
        except ValueError:
            return PlainTextResponse("artifact is not base64", status_code=422)
    media = "application/xml" if name.endswith(".xml") else "text/plain; charset=utf-8"
    return Response(content, media_type=media,
                    headers={"Content-Disposition": f'inline; filename="{name}"'})


async def _operator_form(d: Dashboard, request: Request, what: str) -> Response | None:
    """None if the caller is an operator posting a form this dashboard served; else the refusal."""
    form = await request.form()
    if request.state.role != "operator":
        return PlainTextResponse(f"only an operator may {what}", status_code=403)
    if not d.auth.csrf_ok(request.cookies.get(COOKIE), str(form.get("csrf", ""))):
        return PlainTextResponse("stale or forged form: reload the page", status_code=403)
    return None


async def _act(func, *args) -> str:
    from starlette.concurrency import run_in_threadpool

    try:
        return await run_in_threadpool(func, *args)
    except PanioError as err:
        return err.message + (f" ({err.hint})" if err.hint else "")


async def cancel(d: Dashboard, request: Request) -> Response:
    job_id = request.path_params["id"]
    refused = await _operator_form(d, request, "cancel jobs")
    if refused:
        return refused
    if job_id > MAX_ID:
        return d.page(request, "missing.html", status_code=404, what=f"job {job_id}")
    from controller.jobs import control

    message = await _act(control.cancel, d.store(), job_id)
    return _redirect(d, f"/jobs/{job_id}", message)


async def rerun(d: Dashboard, request: Request) -> Response:
    """Submit the job file of job ID again, as submitted, on the same target (LAVA's resubmit, Jenkins' rebuild)."""
    job_id = request.path_params["id"]
    refused = await _operator_form(d, request, "rerun jobs")
    if refused:
        return refused
    found = _job_or_404(d, job_id)
    text = ((found or {}).get("spec", {}).get("inputs") or {}).get("job_file")
    if found is None or not text:
        return d.page(request, "missing.html", status_code=404, what=f"job {job_id}'s job file")
    from controller.api import jobs as api_jobs

    by = {"name": f"dashboard ({request.client.host if request.client else '?'})", "scope": "operator"}
    body = {"toml": text, "file": f"{found['name']}.toml", "target": found["target"]}
    try:
        from starlette.concurrency import run_in_threadpool

        queued = await run_in_threadpool(api_jobs.submit, d.load_lab(), by, body)
    except PanioError as err:
        return _redirect(d, f"/jobs/{job_id}", "not rerun: " + err.message + (f" ({err.hint})" if err.hint else ""))
    return _redirect(d, f"/jobs/{queued['job_id']}", f"rerun of job {job_id} on {queued['target']}")


async def break_lease(d: Dashboard, request: Request) -> Response:
    target = request.path_params["name"]
    refused = await _operator_form(d, request, "break leases")
    if refused:
        return refused
    from controller.lab.schema import NAME_RE

    if not NAME_RE.match(target):
        return PlainTextResponse("not a target name", status_code=404)
    by = f"dashboard ({request.client.host if request.client else '?'}, {request.state.role})"
    return _redirect(d, "/", await _act(reads.break_lease, target, by))


async def set_health(d: Dashboard, request: Request) -> Response:
    """Operators take a board out of rotation (maintenance) or put it back (good), with a reason."""
    target = request.path_params["name"]
    refused = await _operator_form(d, request, "set a target's health")
    if refused:
        return refused
    from controller.lab.schema import NAME_RE

    form = await request.form()
    health, reason = str(form.get("health", "")), str(form.get("reason", "")).strip()[:500]
    if not NAME_RE.match(target) or health not in ("maintenance", "good"):
        return PlainTextResponse("a target name and health maintenance or good, please", status_code=400)
    if health == "maintenance" and not reason:  # as `panio target health --set maintenance` needs --reason
        return _redirect(d, "/", f"{target}: not changed: maintenance needs a reason (everyone sees it)")
    by = f"dashboard ({request.client.host if request.client else '?'}, {request.state.role})"
    return _redirect(d, "/", await _act(reads.set_health, d.load_lab, target, health, reason, by))


def _redirect(d: Dashboard, path: str, message: str) -> Response:
    """Back to ``path`` saying ``message``; signed, so a crafted link cannot put words in the dashboard's mouth."""
    return RedirectResponse(f"{path}?message={quote(message)}&sig={d.auth.sign(message)}", status_code=303)


def _message(d: Dashboard, request: Request) -> str | None:
    message, sig = request.query_params.get("message"), request.query_params.get("sig", "")
    return message if message and d.auth.signed(message, sig) else None


def schedules(d: Dashboard, request: Request) -> Response:
    return d.page(request, "schedules.html", schedules=reads.schedules())


def _int(text: str | None) -> int | None:
    # isdigit() alone takes "²", which int() refuses
    return int(text) if text and text.isascii() and text.isdigit() and int(text) <= MAX_ID else None


def _when(ts: float | None) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""
    except (OverflowError, ValueError, OSError):  # a stored time past year 9999 (a row written by hand)
        return "?"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _verdict(job: dict) -> str:
    if job["state"] != "done":
        return job["state"] + (" (cancel requested)" if job.get("cancel_requested") else "")
    return job["health"] + (f", {job['result']}" if job.get("result") else "")
