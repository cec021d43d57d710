"""A request body over its bound is answered ``413`` and its connection closed, before the body is read.

Starlette's own ``max_body_size`` raises inside the body's reader; under the
dashboard's auth middleware (then a ``BaseHTTPMiddleware``, whose reads ran in
a task group; now a plain ASGI one, ``guard.py``) that exception reached the server as an exception group and was
answered ``500``. And a ``413`` on a kept-alive connection makes uvicorn read
the rest of the body to throw it away. So this middleware sits outside the
others: a declared ``Content-Length`` over the bound is refused before the
app runs, a chunked body once it passes the bound, and every ``413`` (a
route's own included) closes its connection.

A route with a ``max_body_size`` of its own keeps it, and its own ``413``
(the controller API answers one in JSON). Which route takes a request is found
once per method and path (matching every route each request was a share of
an API call's CPU at 10,000 boards): the answers are kept, at most
``KNOWN_PATHS`` of them (then forgotten all at once, so a client walking
through many job ids costs memory no more than a scan each).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REFUSAL = {"type": "http.response.start", "status": 413,
           "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]}
KNOWN_PATHS = 4096


class BodyLimit:
    def __init__(self, app: ASGIApp, routes: list[BaseRoute], max_bytes: int) -> None:
        self.app, self.routes, self.max_bytes = app, routes, max_bytes
        self._bounds: dict[tuple[str, str, str], int | None] = {}  # (method, root path, path) -> its route's bound

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self._route_bound(scope) is not None:
            return await self.app(scope, receive, _closing_on_413(send))
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self.max_bytes:
            return await _refuse(send, self.max_bytes)
        await _Bounded(self.app, self.max_bytes, receive, send).run(scope)

    def _route_bound(self, scope: Scope) -> int | None:
        """The ``max_body_size`` of the route that takes this request, if it has one."""
        key = (scope.get("method", ""), scope.get("root_path", ""), scope["path"])
        try:
            return self._bounds[key]
        except KeyError:
            pass
        if len(self._bounds) >= KNOWN_PATHS:
            self._bounds.clear()
        bound = self._bounds[key] = self._match(scope)
        return bound

    def _match(self, scope: Scope) -> int | None:
        for route in self.routes:
            if route.matches(scope)[0] == Match.FULL:
                return getattr(getattr(route, "app", None), "max_body_size", None)
        return None


class _Bounded:
    """One request whose body is counted as the app reads it."""

    def __init__(self, app: ASGIApp, max_bytes: int, receive: Receive, send: Send) -> None:
        self.app, self.max_bytes, self._receive, self._send = app, max_bytes, receive, send
        self.received, self.started, self.refused = 0, False, False

    async def run(self, scope: Scope) -> None:
        try:
            await self.app(scope, self.receive, self.send)
        except Exception:
            if not self.refused:
                raise
            # refused: the app saw the client leave mid-body, and what it raised over that is not news

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.max_bytes and not self.refused:
                self.refused = True
                if not self.started:
                    await _refuse(self._send, self.max_bytes)
        return {"type": "http.disconnect"} if self.refused else message

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        self.started = True
        await self._send(message)


async def _refuse(send: Send, max_bytes: int) -> None:
    await send(REFUSAL)
    await send({"type": "http.response.body", "body": f"request body over {max_bytes} bytes\n".encode()})


def _closing_on_413(send: Send) -> Send:
    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 413:
            message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
        await send(message)

    return closing
