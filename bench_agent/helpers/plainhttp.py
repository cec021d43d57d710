"""One HTTP/1.1 GET on a plain socket: the one piece of HTTP panio speaks itself (``shellyplug``'s road to a plug).

Why not ``http.client``: a power hook is a process a power operation (two a
job), and ``http.client`` imports ``ssl`` (loading libssl) and the e-mail
parser, half of such a process's CPU. Measured by the CPU time of the reaped
hook, alternating pairs against the simulated plug (docs/scale.md, "What was
wasteful"): ``shellyplug -d PLUG state`` 101 ms -> 58 ms (x0.59, 20 pairs),
``cycle --off-s 0`` 93 -> 55 ms (x0.60), a job's hooks x0.56. That is what
owning these lines buys; what it gives up is kept small on purpose:

- GET only, ``Connection: close``, ``Accept-Encoding: identity``; no TLS, no
  redirects, no keep-alive, no proxies (a plug on the bench's own network).
- The answer is read to its ``Content-Length``, its last chunk (chunked
  answers are decoded) or the connection's end, whichever says it is whole.

``tests/test_plainhttp.py`` holds it to real servers that are not panio's
(busybox ``httpd``, Python's ``http.server``) and to what ``http.client``
reads from the same answers.
"""

from __future__ import annotations

import re
import socket


def get(host: str, port: int, path: str, headers: dict[str, str], timeout_s: float) -> tuple[int, dict[str, str], str]:
    """``GET path`` from ``host:port``: (status, headers with their names in lower case, body as text).

    Raises ``TimeoutError`` (``socket.timeout``) past ``timeout_s`` on connecting or on any read, ``OSError``
    when the peer cannot be reached, ``ValueError`` when what it sent is no HTTP answer."""
    name = f"[{host}]" if ":" in host else host
    lines = "".join(f"{k}: {v}\r\n" for k, v in {
        "Host": name if port == 80 else f"{name}:{port}", "Accept-Encoding": "identity",
        "Connection": "close", **headers}.items())
    data = bytearray()
    with socket.create_connection((host, port), timeout=timeout_s) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\n{lines}\r\n".encode("latin-1"))
        while not _complete(data) and (chunk := conn.recv(65536)):
            data += chunk
    return _response(bytes(data))


def _complete(data: bytes | bytearray) -> bool:
    """Whether ``data`` holds a whole response (by its Content-Length, or its last chunk; or it is no HTTP
    answer); else read on, to the connection's end."""
    head, sep, body = bytes(data).partition(b"\r\n\r\n")
    if not sep:
        return False
    if not head.startswith(b"HTTP/"):
        return True  # not an HTTP answer: said at once
    length = re.search(rb"\r\ncontent-length:[ \t]*(\d+)", head.lower())
    if length:
        return len(body) >= int(length.group(1))
    return b"chunked" in head.lower() and body.endswith(b"0\r\n\r\n")


def _response(data: bytes) -> tuple[int, dict[str, str], str]:
    """A response's status, headers and body (de-chunked, cut at its Content-Length); ValueError: not HTTP."""
    head, sep, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(None, 2)
    if not sep or len(status) < 2 or not status[0].startswith("HTTP/") or not status[1].isdigit():
        raise ValueError(repr(data[:80]))
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = bytearray()
        while True:
            size_line, _, body = body.partition(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                break
            chunks += body[:size]
            body = body[size + 2:]
        body = bytes(chunks)
    elif headers.get("content-length", "").isdigit():
        body = body[:int(headers["content-length"])]
    return int(status[1]), headers, body.decode("utf-8", "replace")
