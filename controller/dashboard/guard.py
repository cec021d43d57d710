"""The dashboard's guard: who may see a page, and the headers every answer carries (an ASGI middleware).

The controller API's paths (``api.PREFIX``) pass to their handlers, each of which checks its own bearer token,
and get the ``headers``. A page needs the dashboard's auth: with no token configured, only a loopback name
(a web page that rebinds its own DNS name to 127.0.0.1 must not read the dashboard or post to it); else a
session cookie or a bearer token (``request.state.role``), except the public paths (the login form, static
files). Every answer that got through is noted to the outage watch with its status (``unreachable.Watch``).

A plain ASGI middleware, not Starlette's ``BaseHTTPMiddleware``: that one runs each request's app in a task group
of its own and copies every response through a stream, a large share of an API call's CPU (issue 38's
10,000-board run); this one only rewrites the response's start message.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.dashboard.auth import COOKIE, is_loopback


class Guard:
    def __init__(self, app: ASGIApp, auth, watch, headers: dict[str, str], api_prefix: str,
                 public: tuple[str, ...]) -> None:
        self.app, self.auth, self.watch, self.headers = app, auth, watch, headers
        self.api_prefix, self.public = api_prefix + "/", public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if not path.startswith(self.api_prefix):  # each API handler checks its own bearer token
            refused = self._refusal(Request(scope))
            if refused is not None:
                return await refused(scope, receive, send)

        async def send_headed(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(self.headers)
                self.watch.served(path, message["status"])
            await send(message)

        await self.app(scope, receive, send_headed)

    def _refusal(self, request: Request) -> Response | None:
        """None if this page may be served (its caller's role set in ``request.state``); else the answer."""
        if self.auth.open and not is_loopback(request.url.hostname or ""):
            return PlainTextResponse("this dashboard has no token: open it as http://127.0.0.1:PORT/",
                                     status_code=403)
        request.state.role = self.auth.role(request.cookies.get(COOKIE), request.headers.get("authorization"))
        if request.state.role is None and not request.url.path.startswith(self.public):
            if request.headers.get("authorization"):  # a script: say so, not a redirect to a form it cannot fill
                return PlainTextResponse("wrong token: send Authorization: Bearer TOKEN with PANIO_DASHBOARD_TOKEN "
                                         "or PANIO_DASHBOARD_READ_TOKEN", status_code=401,
                                         headers={**self.headers, "WWW-Authenticate": "Bearer"})
            if request.headers.get("hx-request"):
                return Response(status_code=401, headers={"HX-Redirect": "/login"})
            return RedirectResponse("/login", status_code=303)
        return None
