"""panio's one piece of hand-written HTTP (``bench_agent.helpers.plainhttp``) against HTTP servers that are not
panio's: busybox ``httpd`` (static files, a CGI answer delimited by the connection's end, basic auth) and
Python's ``http.server`` (sized, chunked, HTTP/1.0), each answer also read by ``http.client``, which must agree."""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench_agent.errors import AuthFailed
from bench_agent.helpers import plainhttp
from bench_agent.helpers.shellyplug import ShellyPlug

BODY = '{"ison": true, "note": "' + "x" * 70_000 + '"}'  # more than one read of the socket


def _by_http_client(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, "busybox httpd exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("busybox httpd did not listen")


@pytest.fixture
def busybox_httpd(tmp_path):
    busybox = shutil.which("busybox")
    if busybox is None or "httpd" not in subprocess.run([busybox, "--list"], capture_output=True, text=True).stdout:
        pytest.skip("busybox with httpd is not installed")
    home = tmp_path / "www"
    (home / "relay").mkdir(parents=True)
    (home / "cgi-bin").mkdir()
    (home / "shelly").write_text('{"type": "SHSW-1"}')  # a Gen1 device (no "gen")
    (home / "relay" / "0").write_text(BODY)
    cgi = home / "cgi-bin" / "status"
    cgi.write_text("#!/bin/sh\nprintf 'Content-Type: application/json\\r\\n\\r\\n'\nprintf '{\"ison\": false}'\n")
    cgi.chmod(0o755)
    secret = home / "secret"
    secret.mkdir()
    (secret / "state").write_text('{"ison": true}')
    conf = tmp_path / "httpd.conf"
    conf.write_text("/secret:admin:pw\n")
    port = _free_port()
    proc = subprocess.Popen([busybox, "httpd", "-f", "-p", f"127.0.0.1:{port}", "-h", str(home), "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_busybox_httpd_static_cgi_and_basic_auth_read_as_http_client_reads_them(busybox_httpd):
    port = busybox_httpd
    for path in ("/relay/0", "/cgi-bin/status", "/nosuch"):
        status, headers, body = plainhttp.get("127.0.0.1", port, path, {}, 10)
        assert (status, body) == _by_http_client(port, path), path
    status, headers, _ = plainhttp.get("127.0.0.1", port, "/secret/state", {}, 10)
    assert status == 401 and headers["www-authenticate"].lower().startswith("basic")
    plug = ShellyPlug("127.0.0.1", port, password="pw")
    assert plug.gen == 1 and plug._get("/secret/state") == {"ison": True} and plug.state() is True
    with pytest.raises(AuthFailed):
        ShellyPlug("127.0.0.1", port, password="wrong")._get("/secret/state")


class _Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = BODY.encode()
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 4096):
                part = body[i:i + 4096]
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/sized":
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:  # HTTP/1.0 style: no length, the connection's end delimits it
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"gone")
            self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_pythons_http_server_sized_chunked_and_unsized_answers_agree_with_http_client(version):
    handler = type("Answers", (_Answers,), {"protocol_version": version})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        for path in ("/sized", "/chunked", "/other"):
            if version == "HTTP/1.0" and path == "/chunked":
                continue  # no chunks in HTTP/1.0
            status, _, body = plainhttp.get("127.0.0.1", port, path, {}, 10)
            assert (status, body) == _by_http_client(port, path), (version, path)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
