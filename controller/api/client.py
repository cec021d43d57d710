"""The CLI's side of the controller API: `panio job ... --controller URL` talks HTTP and nothing else.

The URL comes from ``--controller`` or ``PANIO_CONTROLLER``, the token from ``PANIO_TOKEN`` only (never the
command line, where every local user could read it in the process list). An error the controller answers
with is panio's own JSON error, raised here again as the same error (``bench_agent.errors.from_json``), so
the exit status is the one the command has without a controller; a controller that cannot be reached is
``Unreachable`` (4).
"""

from __future__ import annotations

import json
import os

from bench_agent.errors import AuthFailed, NotConfigured, PanioError, Refused, Unreachable, UsageError, from_json

URL_VARIABLE, TOKEN_VARIABLE = "PANIO_CONTROLLER", "PANIO_TOKEN"
TIMEOUT_S = 30.0
BY_STATUS = {401: AuthFailed, 403: Refused, 404: NotConfigured, 413: UsageError}


def url_of(given: str | None) -> str | None:
    """The controller's URL (``--controller``, else ``PANIO_CONTROLLER``), or None: no controller."""
    url = given if given is not None else (os.environ.get(URL_VARIABLE) or None)
    if url is None:
        return None
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--controller {url!r} is not an http:// or https:// URL",
                         hint="e.g. --controller https://panio.lab.example:8080 (or set PANIO_CONTROLLER)")
    return url.rstrip("/")


class Controller:
    def __init__(self, url: str) -> None:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        if not token:
            raise NotConfigured(f"{TOKEN_VARIABLE} is not set: the controller API needs a token",
                                hint="an operator makes one with `panio token add NAME --scope submitter ...`; "
                                     "see docs/ci.md", variable=TOKEN_VARIABLE)
        self.url, self.token = url, token

    def call(self, method: str, path: str, body: dict | None = None, raw: bool = False):
        """The answer to ``method path`` (JSON decoded, or bytes with ``raw``); an error answer raised."""
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + "/api/v1" + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as r:
                answer = r.read()
        except urllib.error.HTTPError as exc:
            raise _refusal(exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"controller {self.url} unreachable: {reason}",
                              hint=f"check --controller / {URL_VARIABLE} and that `panio dashboard` serves there",
                              url=self.url) from None
        return answer if raw else json.loads(answer)


def _refusal(status: int, body: bytes) -> PanioError:
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and "error" in obj and "message" in obj:
        return from_json(obj)
    text = body.decode(errors="replace").strip()[:200] or f"HTTP {status}"
    cls = BY_STATUS.get(status, Unreachable)
    return cls(f"the controller answered {status}: {text}", status=status)
