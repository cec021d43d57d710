"""A `panio dashboard` process on a free loopback port, and a small HTTP client that keeps its cookie."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import PANIO
from jobhelp import wait_for


class DashboardProc:
    def __init__(self, env: dict, log: Path, *extra: str) -> None:
        self.log = log
        self.proc = subprocess.Popen([PANIO, "dashboard", "--port", "0", *extra], env=env, stdout=open(log, "w"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        found = wait_for(lambda: re.search(r"http://\S+/", log.read_text()) or self.proc.poll() is not None,
                         timeout_s=30)
        assert self.proc.poll() is None, log.read_text()
        self.url = found.group(0).rstrip("/")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Client:
    """urllib with a cookie jar; redirects are returned, not followed, so a test sees where they point."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect,
                                                  urllib.request.ProxyHandler({}))

    def get(self, path: str, **headers: str):
        return self._open(urllib.request.Request(self.base + path, headers=headers))

    def post(self, path: str, form: dict, **headers: str):
        data = urllib.parse.urlencode(form).encode()
        return self._open(urllib.request.Request(self.base + path, data=data, headers=headers))

    def _open(self, request):
        try:
            with self.opener.open(request, timeout=20) as r:
                return r.status, dict(r.headers), r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode(errors="replace")

    def csrf(self, path: str) -> str:
        return re.search(r'name="csrf" content="([0-9a-f]+)"', self.get(path)[2]).group(1)


def tokened(env: dict, log: Path, operator: str, reader: str) -> DashboardProc:
    """A dashboard that signs in an operator with one token and a reader with the other."""
    return DashboardProc({**env, "PANIO_DASHBOARD_TOKEN": operator, "PANIO_DASHBOARD_READ_TOKEN": reader}, log)


def signed_in(d: DashboardProc, token: str) -> Client:
    """A client signed in with ``token`` (the login answers 303 to the dashboard's front page)."""
    c = Client(d.url)
    status, headers, _ = c.post("/login", {"token": token})
    assert status == 303 and headers["location"] == "/"
    return c
