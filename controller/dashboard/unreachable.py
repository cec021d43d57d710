"""The dashboard and its API while the results database or Redis is away: 503 with the reason, never a 500.

A page says "results database unreachable since 02:14:07" (and reloads itself every few seconds, so it is
back on its own); the API answers 503 with the same reason as panio's JSON error (``unreachable``, exit 4) and
``Retry-After``. The server's log says it once when the service goes and once when it is back
(``bench_agent.outage``). Errors that are not a service away are raised as they came (a bug: 500). A pool whose connections stayed busy
past their wait is the controller overloaded: 503 ``busy`` (exit 8), ``Retry-After: 1``.
"""

from __future__ import annotations

import html
import json
import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bench_agent import outage

RETRY_S = 5
BUSY_RETRY_S = 1
_log = logging.getLogger("panio.dashboard")


class Watch:
    """The services this server found away, for its pages and its log."""

    def __init__(self, headers: dict[str, str], api_prefix: str) -> None:
        """``headers``: every answer's (the app's); ``api_prefix``: the paths answered as JSON."""
        self.outages = outage.Outages(_log.warning, "dashboard")
        self._pinged_at = 0.0  # when Redis, noted away, was last asked whether it is back
        self.headers, self.api_prefix = headers, api_prefix

    def handlers(self) -> dict:
        """Starlette's exception handlers for the errors that say a service is away (by their classes)."""
        import sqlalchemy.exc

        classes: list[type] = [sqlalchemy.exc.DBAPIError]
        try:
            import redis.exceptions

            classes += [redis.exceptions.ConnectionError, redis.exceptions.TimeoutError]
        except ImportError:  # no Redis client: no Redis to lose
            pass
        return {**{cls: self.answer for cls in classes}, sqlalchemy.exc.TimeoutError: self.busy}

    def busy(self, request: Request, exc: Exception) -> Response:
        """Every connection of this process's pool is in use past ``PANIO_RESULTS_POOL_WAIT_S``: the controller is
        overloaded, not the database away. 503 busy (exit 8) with ``Retry-After``; the server's log says it."""
        from bench_agent.results.db import POOL_ENV, pool_size

        reason = (f"the controller is busy: the {pool_size()} connection(s) of its results-database pool "
                  f"({POOL_ENV}) were all in use while this request waited")
        _log.warning("dashboard: %s (%s)", reason, request.url.path)
        headers = {**self.headers, "Retry-After": str(BUSY_RETRY_S)}
        if request.url.path.startswith(self.api_prefix + "/"):
            body = {"error": "busy", "exit": 8, "message": reason,
                    "hint": f"try again in {BUSY_RETRY_S} s; if this lasts, raise {POOL_ENV} (docs/scale.md)"}
            return Response(json.dumps(body), status_code=503, media_type="application/json", headers=headers)
        page = (f'<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{BUSY_RETRY_S}">'
                f"<title>panio: busy</title></head><body><h1>panio dashboard</h1><p><strong>{html.escape(reason)}"
                "</strong></p><p>This page reloads by itself.</p></body></html>")
        return HTMLResponse(page, status_code=503, headers=headers)

    def answer(self, request: Request, exc: Exception) -> Response:
        if not self.outages.failed(exc):
            raise exc  # a statement of ours failed: a bug, a 500 with its traceback in the log
        return self.response(request)

    def response(self, request: Request) -> Response:
        reason = self.outages.reason() or "the lab's services are unreachable"
        headers = {**self.headers, "Retry-After": str(RETRY_S)}
        if request.url.path.startswith(self.api_prefix + "/"):
            body = {"error": "unreachable", "exit": 4, "message": reason,
                    "hint": f"the controller waits for it and answers again by itself; try again in {RETRY_S} s"}
            return Response(json.dumps(body), status_code=503, media_type="application/json", headers=headers)
        text = html.escape(reason)
        page = (f'<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{RETRY_S}">'
                f"<title>panio: {text}</title></head><body><h1>panio dashboard</h1><p><strong>{text}</strong></p>"
                "<p>The controller waits for it and this page comes back by itself (it reloads every "
                f"{RETRY_S} s). Running jobs go on on their hosts.</p></body></html>")
        return HTMLResponse(page, status_code=503, headers=headers)

    def served(self, path: str, status: int) -> None:
        """A page or answer (``path``, its ``status``) that read the stores was served: the results database is back
        (every page reads it); Redis only once it answers, as a page that reads leases serves what it can without
        it ("unknown")."""
        if not self.outages.down or status >= 500 or path.startswith("/static/"):
            return
        for service in self.outages.away():
            if service != outage.REDIS or self._redis_answers():
                self.outages.ok(service)

    def _redis_answers(self) -> bool:
        """One PING of the lab's Redis (at most one a second, fast: this runs on the server's loop)."""
        import time

        from controller import backends

        if time.monotonic() - self._pinged_at < 1.0:
            return False
        self._pinged_at = time.monotonic()
        try:
            import redis

            client = redis.Redis.from_url(backends.redis_url(), socket_connect_timeout=0.5, socket_timeout=0.5)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:  # noqa: BLE001 - any failure: not back yet
            return False
